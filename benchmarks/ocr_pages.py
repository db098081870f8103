"""OCR throughput of ocr_pdf() at concurrency 1, 2, 4, and the cost of the client-side image checks.

A 6-page PDF (text pages drawn with PIL) is rendered at 96 dpi: 400 x 534 px, one 1024-px global view
and 273 image tokens per page (`--dpi 144` gives 600 x 800 px, which adds two 640-px tiles per page).
It is OCR'd with ``max_tokens`` small, so the number is the per-page cost of the image path (upload,
server-side decode, vision encoder, prefill), which is what concurrency can overlap. The image checks
(decode + bomb limit + size: ``vllm_tasks.images.prepare_image``) are timed on the same pages and put
against the mean request time at concurrency 1 (target: < 5 %).

    python benchmarks/ocr_pages.py                  # starts the `ocr` CPU fixture, stops it after
    python benchmarks/ocr_pages.py --url http://127.0.0.1:8000 --max-tokens 16
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks.images import prepare_image
from vllm_tasks.pdf import render_pages

ROOT = Path(__file__).resolve().parent.parent
PAGES = 6


def make_pdf(path: Path, pages: int = PAGES) -> Path:
    images = []
    for n in range(1, pages + 1):
        image = Image.new("RGB", (300, 400), "white")
        draw = ImageDraw.Draw(image)
        draw.text((20, 20), f"Report page {n}", fill="black")
        for line in range(12):
            draw.text((20, 60 + 24 * line), f"Line {line}: revenue {1000 * n + line} EUR", fill="black")
        images.append(image)
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=72)
    return path


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT / "server-fixtures"))
    from launcher import FixtureServer

    with FixtureServer("ocr") as srv:
        print(f"ocr fixture ready in {srv.start_seconds:.1f} s, RSS {srv.rss_mib():.0f} MiB", flush=True)
        yield srv.base_url


def check_cost(pdf: Path, dpi: float, repeat: int) -> float:
    """Median seconds of prepare_image() on a page given as PNG bytes (the path a user's file takes)."""
    _, pages = render_pages(pdf, None, dpi)
    encoded = []
    for _, image in pages:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        encoded.append(buffer.getvalue())
    times = []
    for _ in range(repeat):
        for data in encoded:
            t0 = time.perf_counter()
            prepare_image(data)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=None, help="a running DeepSeek-OCR server (default: start `ocr`)")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--dpi", type=float, default=96.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    warnings.simplefilter("ignore", vt.OCRTruncatedWarning)
    with tempfile.TemporaryDirectory() as tmp, server(args.url) as base_url:
        pdf = make_pdf(Path(tmp) / "six.pdf")
        with vt.Client(base_url, timeout=1800, max_retries=0) as client:
            client.ocr_pdf(
                pdf, pages=[1], max_tokens=args.max_tokens, dpi=args.dpi
            )  # warm-up + processor check
            rows = []
            for concurrency in args.concurrency:
                t0 = time.perf_counter()
                document = client.ocr_pdf(
                    pdf, max_tokens=args.max_tokens, concurrency=concurrency, dpi=args.dpi
                )
                elapsed = time.perf_counter() - t0
                assert [p.page for p in document.pages] == list(range(1, PAGES + 1))
                rows.append((concurrency, elapsed, PAGES / elapsed * 60))
        check = check_cost(pdf, args.dpi, repeat=3)
    base = rows[0][2]
    print(f"\nocr_pdf, {PAGES} pages at {args.dpi:g} dpi, max_tokens={args.max_tokens}, server {base_url}")
    print(f"{'concurrency':>11}  {'seconds':>8}  {'pages/min':>9}  {'vs c=1':>6}")
    for concurrency, elapsed, rate in rows:
        print(f"{concurrency:>11}  {elapsed:>8.1f}  {rate:>9.2f}  {rate / base:>5.2f}x")
    per_request = rows[0][1] / PAGES
    print(
        f"\nimage checks (prepare_image, PNG bytes in): {check * 1000:.1f} ms per page = "
        f"{100 * check / per_request:.2f} % of a request at concurrency 1 ({per_request:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
