"""Small PDFs with a text layer, written by hand (PIL writes image-only PDFs; no PDF writer is a test
dependency)."""

from __future__ import annotations

from collections.abc import Sequence


def text_pdf(texts: Sequence[str], sizes: Sequence[tuple[int, int]] | None = None) -> bytes:
    """A PDF of one page per text, each page holding its text in Helvetica (its text layer), page ``i``
    ``sizes[i]`` points large (default 200 x 100). Texts must not hold ``(``, ``)`` or ``\\``.

    Examples:
        >>> pdf.text_layer(text_pdf(["Hello"]), 1)
        'Hello'
    """
    sizes = sizes or [(200, 100)] * len(texts)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{4 + 2 * index} 0 R" for index in range(len(texts)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(texts)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, (text, (width, height)) in enumerate(zip(texts, sizes, strict=True)):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width} {height}] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * index} 0 R >>".encode()
        )
        stream = f"BT /F1 12 Tf 10 {height // 2} Td ({text}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
