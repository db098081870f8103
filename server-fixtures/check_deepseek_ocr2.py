#!/usr/bin/env python3
"""DeepSeek-OCR-2 through vLLM against transformers' ``deepseek_ocr2`` on real-size random weights: the
equality check the test suite leaves out (too slow for it). Run with the SDK's python from the repository
root:

    .venv/bin/python server-fixtures/check_deepseek_ocr2.py [--out DIR]

It builds ``<cache>/models/deepseek-ocr2-random`` once (build_deepseek_ocr2.build_random: about 470M
parameters, 0.9 GB), computes transformers' greedy answer for the two small pages of tests/data/ocr
(references.py ``deepseek_ocr2``), starts vLLM on the same weights with the ``deepseek-ocr2`` fixture's
flags (real weights instead of dummy ones), sends each page through ``client.ocr`` (the ``deepseek-ocr2``
preset, token ids returned) and compares prompt ids and the 16 generated ids. It prints each step's seconds
and the server's RSS; exit status 0 when both pages are equal and their answers differ, 1 otherwise.

Both pages are equal (small-hello: 27049 sixteen times; small-invoice: 114660 sixteen times), and vLLM's
log-probabilities (``logprobs``, its top 20 at each of the 16 steps) are within 2e-6 of transformers'. That
needs the builder's transformers config to name the encoder's rotary base: vLLM's decoder-as-encoder fixes
``rope_theta=1000000.0`` (``CustomQwen2Decoder`` in ``deepencoder2.py``), transformers' encoder config
falls back to 10000 when none is named. With 10000 the SAM features agree (1.3e-5) but the encoder's
output differs by up to 1.1 and small-hello's answer diverges at its second token (transformers 47866,
vLLM 27049: two candidates 0.03 apart). A model directory whose transformers config names no encoder
rotary base is rebuilt.

Costs on the 2-core machine: build 20 s (75 s at load 8-12), transformers' reference 71 s for both pages
(330 s), vLLM start 44 s (205 s) and 5.2 GB RSS, 13 s a page (45-57 s): far over the contract tier's
budget, which is why the suite's ``deepseek-ocr2`` fixture runs on dummy weights.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from fixture_pins import cache_dir, venv_python  # noqa: E402
from fixture_table import (  # noqa: E402
    BASE_ENV,
    DEEPSEEK_OCR2_ARGS,
    OCR_ENV,
    OCR_REFERENCE_MAX_NEW_TOKENS,
    PURE_TORCHVISION_ENV,
)
from launcher import Server, free_port  # noqa: E402

IMAGES = (
    HERE.parent / "tests" / "data" / "ocr" / "small-hello-112x84.png",
    HERE.parent / "tests" / "data" / "ocr" / "small-invoice-140x112.png",
)
SERVED_NAME = "deepseek-ocr2-random"


def _step(label: str, started: float) -> float:
    now = time.monotonic()
    print(f"{label}: {now - started:.1f} s", flush=True)
    return now


def _served_args() -> list[str]:
    """The fixture's flags with the weights loaded from disk instead of drawn by vLLM."""
    args = list(DEEPSEEK_OCR2_ARGS)
    at = args.index("--load-format")
    del args[at : at + 2]
    return args


def _built(out: Path) -> bool:
    """Whether ``out`` holds both configs, the transformers one naming the encoder's rotary base (a
    directory built without it gives transformers another encoder than vLLM's: rebuilt)."""
    config = out / "transformers" / "config.json"
    if not ((out / "vllm" / "config.json").exists() and config.exists()):
        return False
    encoder = json.loads(config.read_text())["vision_config"]["encoder_config"]
    return "rope_theta" in (encoder.get("rope_parameters") or {})


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=cache_dir() / "models" / "deepseek-ocr2-random")
    out = parser.parse_args().out
    started = time.monotonic()
    if not _built(out):
        build = f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; "
        build += f"from build_deepseek_ocr2 import build_random; build_random(Path({str(out)!r}))"
        subprocess.run([str(venv_python()), "-c", build], check=True)
        started = _step("build", started)
    prompt = "<|grounding|>Convert the document to markdown."
    requests = [
        {"image": str(image), "prompt": prompt, "max_new_tokens": OCR_REFERENCE_MAX_NEW_TOKENS}
        for image in IMAGES
    ]
    done = subprocess.run(
        [str(venv_python()), str(HERE / "references.py"), "deepseek-ocr2", str(out)],
        input=json.dumps(requests),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = json.loads(done.stdout)
    started = _step("transformers reference, both pages", started)

    import vllm_tasks as vt

    port = free_port("127.0.0.1")
    command = [
        str(venv_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(out / "vllm"),
        "--served-model-name",
        SERVED_NAME,
        "--port",
        str(port),
        *_served_args(),
    ]
    env = {**BASE_ENV, **OCR_ENV, **PURE_TORCHVISION_ENV}
    server = Server(SERVED_NAME, command, port=port, env=env, start_timeout=900)
    equal = True
    try:
        server.start()
        print(f"vLLM ready: {server.start_seconds:.1f} s, RSS {server.rss_mib():.0f} MiB", flush=True)
        started = time.monotonic()
        with vt.Client(server.base_url, timeout=900, max_retries=0) as client:
            for image, answer in zip(IMAGES, expected, strict=True):
                result = client.ocr(
                    image,
                    max_tokens=OCR_REFERENCE_MAX_NEW_TOKENS,
                    extra_body={"return_token_ids": True},
                    require_ngram_processor=True,
                )
                started = _step(f"vLLM {image.name} ({result.preset})", started)
                same = result.prompt_token_ids == answer["prompt_ids"] and result.token_ids == answer["ids"]
                equal = equal and same
                print(f"  vLLM         {len(result.prompt_token_ids or [])} prompt ids, {result.token_ids}")
                print(f"  transformers {len(answer['prompt_ids'])} prompt ids, {answer['ids']}")
                print(f"  equal: {same}", flush=True)
    finally:
        server.stop()
    differ = expected[0]["ids"] != expected[1]["ids"]
    print(f"both pages equal: {equal}; the two pages' answers differ: {differ}")
    return 0 if equal and differ else 1


if __name__ == "__main__":
    sys.exit(main())
