#!/usr/bin/env python3
"""Record real responses of the ``stt`` fixture (Whisper base) into tests/recorded/stt/<name>.json.

    python3 server-fixtures/record_stt.py                      # start the stt fixture, record, stop it
    python3 server-fixtures/record_stt.py --url http://127.0.0.1:8000

The same file shape as record.py, with multipart requests described by ``form`` (the form fields) and
``file`` (the name of the uploaded file under tests/data/audio/, or ``"<random bytes>"``); streamed
responses keep the raw ``text/event-stream`` body in ``body_text``. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fixture_table import FIXTURES  # noqa: E402
from launcher import FixtureServer  # noqa: E402

OUT = HERE.parent / "tests" / "recorded" / "stt"
AUDIO = HERE.parent / "tests" / "data" / "audio"
TRANSCRIBE = "/v1/audio/transcriptions"
TRANSLATE = "/v1/audio/translations"
RANDOM_BYTES = "<random bytes>"


def exchanges(model: str) -> list[tuple[str, str, str | None, dict[str, str | list[str]]]]:
    """(name, path, file, form) for every recorded exchange; file None means a GET."""
    en = {"model": model, "language": "en"}
    verbose = {**en, "response_format": "verbose_json"}
    return [
        ("version", "/version", None, {}),
        ("models", "/v1/models", None, {}),
        ("openapi", "/openapi.json", None, {}),
        ("transcription_json", TRANSCRIBE, "fox.wav", en),
        ("transcription_json_detect_language", TRANSCRIBE, "fox.wav", {"model": model}),
        ("transcription_text", TRANSCRIBE, "fox.wav", {**en, "response_format": "text"}),
        ("transcription_verbose_json", TRANSCRIBE, "numbers.wav", verbose),
        ("transcription_json_long", TRANSCRIBE, "long45.wav", en),
        ("transcription_verbose_json_long", TRANSCRIBE, "long45.wav", verbose),
        ("transcription_stream", TRANSCRIBE, "fox.wav", {**en, "stream": "true"}),
        (
            "transcription_stream_usage",
            TRANSCRIBE,
            "fox.wav",
            {**en, "stream": "true", "stream_include_usage": "true"},
        ),
        ("transcription_stream_long", TRANSCRIBE, "long45.wav", {**en, "stream": "true"}),
        # Beam search re-runs the encoder at every step: about 1 token/s on 2 CPU cores, so keep it short.
        (
            "transcription_beam_search",
            TRANSCRIBE,
            "fox.wav",
            {**en, "use_beam_search": "true", "n": "2", "max_completion_tokens": "4"},
        ),
        (
            "transcription_granularities",
            TRANSCRIBE,
            "fox.wav",
            {**en, "response_format": "verbose_json", "timestamp_granularities[]": ["segment", "word"]},
        ),
        ("translation_json", TRANSLATE, "french.wav", {"model": model, "language": "fr"}),
        ("translation_stream", TRANSLATE, "french.wav", {"model": model, "language": "fr", "stream": "true"}),
        ("error_srt", TRANSCRIBE, "fox.wav", {**en, "response_format": "srt"}),
        ("error_unknown_model", TRANSCRIBE, "fox.wav", {"model": "no-such-model"}),
        ("error_corrupt_audio", TRANSCRIBE, RANDOM_BYTES, en),
        (
            "error_beam_search_stream",
            TRANSCRIBE,
            "fox.wav",
            {**en, "use_beam_search": "true", "stream": "true"},
        ),
        ("error_unsupported_language", TRANSCRIBE, "fox.wav", {"model": model, "language": "xx"}),
        ("error_usage_without_stream", TRANSCRIBE, "fox.wav", {**en, "stream_include_usage": "true"}),
    ]


def multipart(form: dict[str, str | list[str]], filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    lines: list[bytes] = []
    for key, value in form.items():
        for item in value if isinstance(value, list) else [value]:
            lines += [f"--{boundary}".encode(), f'Content-Disposition: form-data; name="{key}"'.encode(), b""]
            lines.append(item.encode())
    lines += [
        f"--{boundary}".encode(),
        f'Content-Disposition: form-data; name="file"; filename="{filename}"'.encode(),
        b"Content-Type: application/octet-stream",
        b"",
        content,
        f"--{boundary}--".encode(),
        b"",
    ]
    return b"\r\n".join(lines), f"multipart/form-data; boundary={boundary}"


def call(base_url: str, path: str, file: str | None, form: dict[str, str | list[str]]) -> dict:
    headers: dict[str, str] = {}
    data = None
    if file is not None:
        content = os.urandom(4096) if file == RANDOM_BYTES else (AUDIO / file).read_bytes()
        filename = "audio.bin" if file == RANDOM_BYTES else file
        data, headers["Content-Type"] = multipart(form, filename, content)
    method = "POST" if data else "GET"
    req = urllib.request.Request(base_url + path, data=data, method=method, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=300)
        status, resp_headers, body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, resp_headers, body = e.code, e.headers, e.read()
    return {
        "request": {
            "method": req.get_method(),
            "path": path,
            "json": None,
            "form": form,
            "file": file,
            "headers": {},
        },
        "response": {
            "status": status,
            "headers": {k.lower(): v for k, v in resp_headers.items()},
            "body_text": body.decode("utf-8"),
            "body_b64": None,
        },
    }


def record(base_url: str, only: list[str] | None = None) -> None:
    model = FIXTURES["stt"].served_model_name
    version = json.loads(urllib.request.urlopen(base_url + "/version", timeout=30).read())["version"]
    OUT.mkdir(parents=True, exist_ok=True)
    for name, path, file, form in exchanges(model):
        if only and name not in only:
            continue
        rec = {"fixture": "stt", "vllm_version": version, **call(base_url, path, file, form)}
        (OUT / f"{name}.json").write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        print(f"  stt/{name}: {rec['response']['status']}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="record only these exchanges (default: all)")
    ap.add_argument("--url", help="use this running stt server")
    args = ap.parse_args()
    if args.url:
        record(args.url.rstrip("/"), args.names)
        return 0
    with FixtureServer("stt") as srv:
        print(f"[record] stt up at {srv.base_url} in {srv.start_seconds:.1f} s", flush=True)
        record(srv.base_url, args.names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
