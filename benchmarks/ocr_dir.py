"""ocr_dir()'s client-side cost per page against a plain loop of client.ocr / client.ocr_pdf, same run.

The server is a FakeVLLM in its own process (no model: it answers a fixed markdown page with boxes at
once), so what is measured is the client: PDF rendering, image checks and encoding, HTTP, parsing, and,
for ocr_dir, hashing the inputs, one record per page (written, fsync'ed, renamed), the markdown files,
pages.jsonl and the manifest. Both sides send ``--concurrency`` pages at a time to the same server.

The folder: ``--pdfs`` PDFs of ``--pdf-pages`` pages (A4 text pages drawn with PIL, rendered at 144 dpi:
1190 x 1684 px) and ``--images`` PNG pages of the same size. Reported: wall seconds and this process's CPU
seconds (the client's cost: the server runs elsewhere) per page, best of ``--repeat``, alternating.

    python benchmarks/ocr_dir.py [--pdfs 4 --pdf-pages 10 --images 40 --concurrency 8 --repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

from PIL import Image, ImageDraw

import vllm_tasks as vt

SERVER = """
import sys, time
from vllm_tasks.testing import OCR_TASKS, FakeVLLM
fake = FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS).start()
print(fake.url, flush=True)
sys.stdin.read()
"""


def page_image(number: int) -> Image.Image:
    image = Image.new("RGB", (1190, 1684), "white")
    draw = ImageDraw.Draw(image)
    for line in range(40):
        draw.text(
            (80, 80 + line * 38), f"Page {number}, line {line}: the quick brown fox jumps over", fill="black"
        )
    return image


def make_folder(folder: Path, pdfs: int, pdf_pages: int, images: int) -> int:
    folder.mkdir(parents=True)
    for index in range(pdfs):
        pages = [page_image(index * pdf_pages + n) for n in range(pdf_pages)]
        pages[0].save(folder / f"doc{index}.pdf", save_all=True, append_images=pages[1:], resolution=144.0)
    for index in range(images):
        page_image(1000 + index).save(folder / f"scan{index}.png")
    return pdfs * pdf_pages + images


def plain_loop(url: str, folder: Path, concurrency: int) -> Callable[[], Awaitable[int]]:
    """The alternative: an AsyncClient, a semaphore per document, ocr_pdf for PDFs (its own page
    concurrency) and ocr for images; markdown kept in memory, nothing saved."""

    async def run() -> int:
        gate = asyncio.Semaphore(concurrency)
        async with vt.AsyncClient(url) as client:

            async def one(path: Path) -> int:
                async with gate:
                    if path.suffix == ".pdf":
                        return len((await client.ocr_pdf(path, concurrency=concurrency)).pages)
                    await client.ocr(path)
                    return 1

            return sum(await asyncio.gather(*(one(path) for path in sorted(folder.iterdir()))))

    return run


def job(url: str, folder: Path, out: Path, concurrency: int) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        shutil.rmtree(out, ignore_errors=True)
        report = await vt.aocr_dir(url, folder, out, concurrency=concurrency)
        assert report.complete
        return report.units

    return run


def measure(run: Callable[[], Awaitable[int]]) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    pages = asyncio.run(run())
    return time.perf_counter() - wall, time.process_time() - cpu, pages


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pdfs", type=int, default=4)
    parser.add_argument("--pdf-pages", type=int, default=10)
    parser.add_argument("--images", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the fake's page is longer than max_tokens allows: truncated
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = server.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "scans"
            pages = make_folder(folder, args.pdfs, args.pdf_pages, args.images)
            runs = {
                "plain loop (client.ocr_pdf / client.ocr)": plain_loop(url, folder, args.concurrency),
                "vt.ocr_dir (records, fsync, outputs)": job(url, folder, Path(tmp) / "out", args.concurrency),
            }
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeat):
                for name, run in runs.items():
                    wall, cpu, done = measure(run)
                    assert done == pages, (name, done, pages)
                    old = best.get(name, (float("inf"), float("inf")))
                    best[name] = (min(old[0], wall), min(old[1], cpu))
    finally:
        server.communicate("")
    print(f"{pages} pages ({args.pdfs} PDFs x {args.pdf_pages} + {args.images} PNGs, 1190 x 1684 px), "
          f"concurrency {args.concurrency}, best of {args.repeat}")  # fmt: skip
    base_wall, base_cpu = next(iter(best.values()))
    print(f"{'client':45} {'ms/page wall':>13} {'ms/page CPU':>12} {'pages/s':>8} {'x wall':>7} {'x CPU':>6}")
    for name, (wall, cpu) in best.items():
        print(f"{name:45} {1000 * wall / pages:13.1f} {1000 * cpu / pages:12.1f} {pages / wall:8.1f} "
              f"{wall / base_wall:7.2f} {cpu / base_cpu:6.2f}")  # fmt: skip
    print(f"(DeepSeek-OCR's 200,000 pages/day on one A100 is {86400 / 200000 * 1000:.0f} ms/page)")


if __name__ == "__main__":
    main()
