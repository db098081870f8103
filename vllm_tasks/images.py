"""Images as chat content parts, for multimodal scoring, reranking and OCR requests.

vLLM takes images inside ``{"content": [...]}`` inputs as OpenAI-style content parts::

    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}

The two public entry points turn anything a user holds into that form:

- :func:`image_to_data_url`: a path, ``bytes``, a binary file object, a PIL image, a numpy array, a
  ``data:`` URL or an ``http(s)://`` URL -> the URL string to send.
- :func:`image_content_part`: the same inputs -> the content-part dict.

Encoded image bytes (PNG, JPEG, GIF, WebP, BMP, TIFF) are sent as they are, without decoding; pillow is
only needed for PIL images and numpy arrays, which are encoded as PNG. Paths are read only when they name
a regular file (:func:`read_regular_file`: never a FIFO or a device) of at most
``defaults.IMAGE_MAX_BYTES``. ``http(s)`` URLs are passed on for the server to fetch (vLLM answers 422 when
it cannot), unless ``FetchLimits(refuse_private=True)``: then the client fetches them itself.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import struct
import warnings
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import defaults, media_files
from .dependencies import require
from .errors import InvalidInputError

ImageInput = Any
"""Anything :func:`image_to_data_url` accepts (see there)."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)


def png_from_scanlines(width: int, height: int, scanlines: bytes, *, channels: int = 3) -> bytes:
    """A PNG file of 8-bit pixels, encoded with ``zlib`` alone (no pillow).

    Args:
        width: pixels per row.
        height: rows.
        scanlines: the rows, each a filter byte (``0``: none) then ``width * channels`` bytes.
        channels: 3 for RGB, 1 for grey.

    Returns:
        The PNG file's bytes (``IHDR``, one ``IDAT``, ``IEND``).

    Examples:
        >>> png = png_from_scanlines(2, 1, bytes([0, 255, 0, 0, 0, 0, 255]))
        >>> sniff_mime_type(png)
        'image/png'
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    colour_type = 2 if channels == 3 else 0
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(scanlines))
        + chunk(b"IEND", b"")
    )


def sniff_mime_type(data: bytes) -> str | None:
    """The MIME type of encoded image bytes from their first bytes, or ``None`` if unrecognised.

    Examples:
        >>> sniff_mime_type(b"\\x89PNG\\r\\n\\x1a\\n...")
        'image/png'
    """
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    return None


def is_image(value: object) -> bool:
    """Whether ``value`` is an image object this module converts without being told.

    True for ``bytes``/``bytearray``/``memoryview``, ``pathlib`` paths, binary file objects, PIL images
    and numpy arrays. Plain strings are False: in a document list a string is text (wrap a path in
    ``pathlib.Path``, or call :func:`image_content_part` on a URL).
    """
    if isinstance(value, bytes | bytearray | memoryview | os.PathLike):
        return True
    if hasattr(value, "read") and not isinstance(value, str):
        return True
    return _is_pil_image(value) or _is_ndarray(value)


def image_to_data_url(image: ImageInput, *, field: str = "image") -> str:
    """Turn an image into the URL string of an ``image_url`` content part.

    Args:
        image: one of
            - ``str`` or ``os.PathLike``: a file path (a ``str`` starting with ``data:`` or
              ``http(s)://`` is taken as a URL instead); read only if it is a regular file of at most
              ``defaults.IMAGE_MAX_BYTES`` (see :func:`read_regular_file`);
            - ``bytes`` / ``bytearray`` / ``memoryview``: an encoded image file (PNG, JPEG, GIF, WebP,
              BMP, TIFF);
            - a binary file object (anything with ``read()``), read up to ``defaults.IMAGE_MAX_BYTES``;
            - a ``PIL.Image.Image`` (encoded as PNG);
            - a numpy array ``[h, w]``, ``[h, w, 3]`` or ``[h, w, 4]`` of ``uint8`` (encoded as PNG).
        field: the argument name used in error messages (e.g. ``documents[3]``).

    Returns:
        A ``data:<mime>;base64,...`` URL, or the ``http(s)``/``data:`` URL unchanged.

    Raises:
        InvalidInputError: ``kind="argument"``: a missing or unreadable path, one that is not a regular
            file (a folder, a FIFO, a device), or an unsupported type; ``kind="image_decode"``:
            unrecognised bytes, a ``data:`` URL of another MIME type than ``image/*`` or whose base64 does
            not decode; ``kind="image_too_large"``: a file over ``defaults.IMAGE_MAX_BYTES``.
        MissingDependency: for a PIL image or numpy array when pillow is not installed.
    """
    if isinstance(image, str):
        stripped = image.strip()
        if stripped.startswith("data:"):
            data_url_bytes(stripped, field)
            return stripped
        if is_remote_url(stripped):
            return stripped
    if _is_pil_image(image):
        return _pil_to_data_url(image)
    if _is_ndarray(image):
        return _pil_to_data_url(_ndarray_to_pil(image, field))
    return _from_bytes(_encoded_bytes(image, field), field)


def checked_part(part: Mapping[str, Any], field: str) -> dict[str, Any]:
    """A content part the caller wrote, as it is sent: the ``data:`` URL of an ``image_url`` part is checked
    as :func:`image_to_data_url` checks one (an ``image/*`` type, base64 that decodes).

    Raises:
        InvalidInputError: ``kind="image_decode"`` (see :func:`data_url_bytes`).

    Examples:
        >>> checked_part({"type": "image_url", "image_url": {"url": "https://a/b.png"}}, "documents[0]")
        {'type': 'image_url', 'image_url': {'url': 'https://a/b.png'}}
    """
    if part.get("type") == "image_url":
        inner = part.get("image_url")
        url = inner.get("url") if isinstance(inner, Mapping) else inner
        if isinstance(url, str) and url.strip().startswith("data:"):
            data_url_bytes(url.strip(), field)
    return dict(part)


def image_content_part(image: ImageInput, *, field: str = "image") -> dict[str, Any]:
    """Turn an image into a chat content part ``{"type": "image_url", "image_url": {"url": ...}}``.

    Args:
        image: anything :func:`image_to_data_url` accepts.
        field: the argument name used in error messages.

    Returns:
        The content-part dict, ready to put in ``{"content": [...]}``.

    Raises:
        InvalidInputError: see :func:`image_to_data_url`.

    Examples:
        >>> part = image_content_part("https://example.com/cat.jpg")
        >>> part["image_url"]["url"]
        'https://example.com/cat.jpg'
    """
    return {"type": "image_url", "image_url": {"url": image_to_data_url(image, field=field)}}


def _from_bytes(data: bytes, field: str) -> str:
    mime = sniff_mime_type(data)
    if mime is None:
        raise InvalidInputError(
            field,
            data[:16],
            "is not a recognised image file (PNG, JPEG, GIF, WebP, BMP, TIFF)",
            "Pass encoded image bytes, or a PIL image.",
        )
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _is_pil_image(value: object) -> bool:
    return any(cls.__name__ == "Image" and cls.__module__.startswith("PIL.") for cls in type(value).__mro__)


def _is_ndarray(value: object) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _pil_to_data_url(image: Any) -> str:
    return _data_url("image/png", _png_bytes(image))


def _png_bytes(image: Any) -> bytes:
    buffer = io.BytesIO()
    if image.mode not in ("RGB", "RGBA", "L", "LA", "P", "I", "I;16", "1"):
        image = image.convert("RGB")
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _ndarray_to_pil(array: Any, field: str) -> Any:
    Image = require("PIL.Image", "image", "a numpy image")  # noqa: N806
    shape = tuple(array.shape)
    if len(shape) not in (2, 3) or (len(shape) == 3 and shape[2] not in (1, 3, 4)):
        raise InvalidInputError(
            field, f"ndarray{shape}", "is not an image array", "Use shape [h, w], [h, w, 3] or [h, w, 4]."
        )
    if str(array.dtype) != "uint8":
        raise InvalidInputError(
            field,
            f"ndarray dtype {array.dtype}",
            "must be uint8",
            "Scale to 0..255 and convert with `array.astype(numpy.uint8)`.",
        )
    if len(shape) == 3 and shape[2] == 1:
        array = array[:, :, 0]
    return Image.fromarray(array)


# --------------------------------------------------------------------------------------------------
# Pre-upload checks (OCR): decodable, under PIL's bomb limit, sensible size
# --------------------------------------------------------------------------------------------------

PIL_MAX_PIXELS = 178_956_970
"""PIL's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``); vLLM answers 500 above it."""


@dataclass(frozen=True)
class PreparedImage:
    """An image that passed the pre-upload checks, encoded for a request.

    Attributes:
        data_url: the ``data:<mime>;base64,...`` URL to send.
        data: the encoded bytes sent (the original bytes unless the image was downscaled).
        mime: their MIME type.
        size: ``(width, height)`` as sent.
        original_size: ``(width, height)`` of the caller's image (differs from ``size`` after a downscale).
        original: the caller's image (encoded bytes or a PIL image), kept for drawing and cropping.
    """

    data_url: str
    data: bytes
    mime: str
    size: tuple[int, int]
    original_size: tuple[int, int]
    original: Any

    @property
    def downscaled(self) -> bool:
        """Whether the image was made smaller before upload."""
        return self.size != self.original_size

    def open_original(self) -> Any:
        """The caller's image as a PIL image (decoded again from bytes when needed)."""
        if isinstance(self.original, bytes | bytearray):
            image = _pil().open(io.BytesIO(self.original))
            image.load()
            return image
        return self.original


def is_remote_url(image: object) -> bool:
    """Whether ``image`` is an ``http(s)://`` URL string (fetched client-side before the checks)."""
    return isinstance(image, str) and image.strip().lower().startswith(("http://", "https://"))


def prepare_image(
    image: ImageInput,
    *,
    field: str = "image",
    max_pixels: int = PIL_MAX_PIXELS,
    max_side: int | None = defaults.IMAGE_MAX_SIDE,
    downscale: bool = True,
) -> PreparedImage:
    """Check an image before upload and encode it as a base64 data URL.

    The checks: the image decodes completely (a truncated or corrupt file is caught here, not by a 400
    from the server); its pixel count is at most ``max_pixels`` (PIL's bomb limit by default: the server
    answers 500 above it, and decoding it here would cost gigabytes); its longest side is at most
    ``max_side`` (else it is downscaled with Lanczos, keeping the aspect ratio, or refused when
    ``downscale`` is False). Needs pillow. CPU-heavy for large images: ``AsyncClient`` runs it in a worker
    thread. The default ``max_side`` (4096): DeepSeek-OCR sees at most six 640-px tiles plus a 1024-px
    global view, so larger images only cost upload and server decode time.

    Args:
        image: a path, ``bytes``, a binary file object, a PIL image, a numpy array or a ``data:`` URL
            (fetch ``http(s)`` URLs first; see :func:`is_remote_url`).
        field: the argument name used in error messages.
        max_pixels: refuse images with more pixels than this.
        max_side: downscale (or refuse) images whose longest side is longer; ``None`` for no limit.
        downscale: False refuses an over-long image (``kind="image_too_large"``) instead.

    Returns:
        PreparedImage: the data URL plus the sizes sent and original.

    Raises:
        InvalidInputError: ``kind="image_decode"``: the data is not a decodable image;
            ``kind="image_too_large"``: over ``max_pixels``, or over ``max_side`` with ``downscale=False``;
            ``kind="argument"``: an unsupported input type or an unreadable path.
        MissingDependency: pillow is not installed.
    """
    pil_image = _pil()
    pil, data, original = _decoded(pil_image, image, field, max_pixels)
    width, height = size = pil.size
    if max_side is not None and max(size) > max_side:
        if not downscale:
            too_large = _too_large(
                field,
                f"{width}x{height} image",
                f"is larger than max_side={max_side} pixels",
                "Pass downscale=True, raise max_side, or resize the image.",
            )
            too_large.size = size
            raise too_large
        return _downscaled(pil_image, pil, max_side, original)
    if data is None:
        sent = _png_bytes(pil)
        return PreparedImage(_data_url("image/png", sent), sent, "image/png", size, size, original)
    mime = sniff_mime_type(data) or pil_image.MIME.get(pil.format or "", "image/png")
    return PreparedImage(_data_url(mime, data), data, mime, size, size, original)


def _decoded(Image: Any, image: ImageInput, field: str, max_pixels: int) -> tuple[Any, bytes | None, Any]:  # noqa: N803
    """``(PIL image fully decoded and checked, the encoded bytes or None, the caller's image to keep)``."""
    if _is_pil_image(image):
        pil, original, data = image, image, None
    elif _is_ndarray(image):
        pil = _ndarray_to_pil(image, field)
        original, data = pil, None
    else:
        data = _encoded_bytes(image, field)
        original = data
        pil = _open_checked(Image, data, field, max_pixels)
    width, height = pil.size
    _check_pixels(width, height, field, max_pixels)
    if width < 1 or height < 1:
        raise _undecodable(field, f"{width}x{height} image", "has no pixels", "Pass a non-empty image.")
    if data is not None:
        try:
            pil.load()
        except (OSError, SyntaxError, ValueError) as error:
            raise _undecodable(
                field, data[:16], f"does not decode completely ({error})", "The file is truncated or corrupt."
            ) from error
    return pil, data, original


def _downscaled(Image: Any, pil: Any, max_side: int, original: Any) -> PreparedImage:  # noqa: N803
    """``pil`` resized (Lanczos, aspect kept) so its longest side is ``max_side``; JPEG stays JPEG."""
    width, height = size = pil.size
    scale = max_side / max(size)
    target = (max(1, round(width * scale)), max(1, round(height * scale)))
    resized = pil.convert("RGB") if pil.mode not in ("RGB", "L") else pil
    resized = resized.resize(target, Image.Resampling.LANCZOS)
    fmt, mime = ("JPEG", "image/jpeg") if getattr(pil, "format", None) == "JPEG" else ("PNG", "image/png")
    buffer = io.BytesIO()
    resized.save(buffer, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    sent = buffer.getvalue()
    return PreparedImage(_data_url(mime, sent), sent, mime, target, size, original)


def _pil() -> Any:
    return require("PIL.Image", "image", "checking images before upload")


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _encoded_bytes(image: ImageInput, field: str) -> bytes:
    """The encoded bytes of anything but a PIL image or an array (a ``data:`` URL decoded, a path or a
    file object read within ``defaults.IMAGE_MAX_BYTES``)."""
    if isinstance(image, str):
        stripped = image.strip()
        if stripped.startswith("data:"):
            return data_url_bytes(stripped, field)
        if is_remote_url(stripped):
            raise InvalidInputError(
                field, image, "is a URL", "Fetch it first (the OCR methods do this unless fetch_urls=False)."
            )
    if isinstance(image, str | os.PathLike):
        return read_regular_file(image, field)
    if isinstance(image, bytes | bytearray | memoryview):
        return bytes(image)
    if hasattr(image, "read"):
        return media_files.read_capped(
            image.read, field, getattr(image, "name", image), defaults.IMAGE_MAX_BYTES, _over_cap
        )
    raise InvalidInputError(
        field,
        type(image).__name__,
        "is not an image",
        "Pass a path, bytes, a binary file object, a PIL image, a numpy array or a data/http(s) URL.",
    )


def data_url_bytes(url: str, field: str = "image") -> bytes:
    """The image bytes of a ``data:image/<type>;base64,<payload>`` URL, checked strictly.

    Args:
        url: the ``data:`` URL.
        field: the argument name used in error messages.

    Returns:
        The decoded bytes.

    Raises:
        InvalidInputError: ``kind="image_decode"``: its MIME type is not ``image/*``, or its payload is not
            valid base64 or is empty; ``kind="argument"``: it is not base64-encoded (vLLM decodes only
            base64).

    Examples:
        >>> data_url_bytes("data:image/png;base64,iVBORw0KGgo=")[:4]
        b'\\x89PNG'
    """
    header, comma, payload = url.partition(",")
    mime = header.removeprefix("data:").split(";")[0].strip().lower() or "text/plain"
    if not mime.startswith("image/"):
        raise _undecodable(
            field, url, f"is a data URL of {mime}, not an image", "Pass a data:image/<type>;base64 URL."
        )
    if not comma or not header.lower().endswith(";base64"):
        raise InvalidInputError(
            field, url, "is a data URL without ';base64,'", "vLLM only decodes base64 data URLs."
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise _undecodable(field, url, f"is not valid base64 ({error})", "Encode the image bytes.") from None
    if not data:
        raise _undecodable(field, url, "holds no bytes", "Pass a non-empty image.")
    return data


def read_regular_file(
    path: str | os.PathLike[str], field: str, *, max_bytes: int = defaults.IMAGE_MAX_BYTES
) -> bytes:
    """The bytes of the image file at ``path``: :func:`vllm_tasks.media_files.read_regular_file` (never
    a FIFO, a device or a folder; a file over ``max_bytes`` is refused without reading it).

    Args:
        path: the file's path.
        field: the argument name used in error messages.
        max_bytes: the largest file read.

    Returns:
        The file's bytes.

    Raises:
        InvalidInputError: naming ``path``: ``kind="argument"`` for a path that does not exist, cannot be
            read, names no regular file, or cannot be a path (a NUL byte, an unencodable name);
            ``kind="image_too_large"`` for a file over ``max_bytes``.

    Examples:
        >>> try:
        ...     read_regular_file("/dev/zero", "image")
        ... except InvalidInputError as error:
        ...     print(error)
        image='/dev/zero': is a device, not a regular file. Pass the path of a file.
    """
    return media_files.read_regular_file(path, field, max_bytes=max_bytes, too_large=_over_cap)


def _over_cap(field: str, value: object, max_bytes: int, size: str) -> InvalidInputError:
    return _too_large(
        field,
        value,
        f"is larger ({size}) than the cap on image files of {max_bytes:,} bytes (defaults.IMAGE_MAX_BYTES)",
        "Resize or recompress the image.",
    )


def _undecodable(field: str, value: object, problem: str, fix: str) -> InvalidInputError:
    """An image that does not decode, or is not an image (``kind="image_decode"``)."""
    return InvalidInputError(field, value, problem, fix, kind="image_decode")


def _too_large(field: str, value: object, problem: str, fix: str) -> InvalidInputError:
    """An image over the pixel or size limit (``kind="image_too_large"``; the caller sets ``size``)."""
    return InvalidInputError(field, value, problem, fix, kind="image_too_large")


def _check_pixels(width: int, height: int, field: str, max_pixels: int) -> None:
    if width * height > max_pixels:
        too_large = _too_large(
            field,
            f"{width}x{height} image",
            f"has {width * height:,} pixels, over the limit of {max_pixels:,} (PIL's decompression-bomb "
            "limit: the server answers 500)",
            "Resize or split the image before sending it.",
        )
        too_large.size = (width, height)
        raise too_large


def _open_checked(Image: Any, data: bytes, field: str, max_pixels: int) -> Any:  # noqa: N803
    """Open (header only) and check the pixel count before anything is decoded."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            pil = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        too_large = _too_large(
            field,
            data[:16],
            f"is far over PIL's decompression-bomb limit of {max_pixels:,} pixels ({error})",
            "Resize or split the image before sending it.",
        )
        raise too_large from error
    except (OSError, SyntaxError, ValueError) as error:
        raise _undecodable(
            field,
            data[:16],
            "is not a decodable image",
            "Pass an image file (PNG, JPEG, WebP, ...), a PIL image or a numpy array.",
        ) from error
    _check_pixels(pil.size[0], pil.size[1], field, max_pixels)
    return pil
