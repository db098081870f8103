"""nginx answering like the vLLM 0.32 `embed` fixture, fast enough that the client is the bottleneck.

The answers are the fixture's recordings (``tests/recorded/embed/``: ``/version``, ``/v1/models``,
``/openapi.json``, ``/health`` as recorded; ``/v1/embeddings`` in the ``float``, ``base64`` and ``bytes``
encodings) with their ``data`` widened to ``batch`` items (the two recorded vectors in turn, ``index``
0..batch-1, ``usage`` scaled), serialized as vLLM serializes them (the recorded float and base64 bodies
are byte-identical to ``json.dumps(..., separators=(",", ":"))`` of themselves; the ``bytes`` metadata
header keeps Python's default separators, as recorded). nginx serves them as static files: a ``POST``
gets the static module's 405, which ``error_page 405 =200 $uri`` turns into the file (nginx reads and
drops the request body). One difference on the wire: the ``bytes`` body comes with a ``content-length``
where uvicorn streamed it chunked.

nginx cannot read a request body, so it cannot choose the answer by ``encoding_format`` or by the number
of inputs: there is one ``server`` block (port) per encoding, and every embeddings answer has ``batch``
rows. A client must send full batches in the encoding its port serves; the benchmark checks every
decoded matrix against :meth:`NginxVLLM.expected`, so a mismatch fails rather than counts.

    with NginxVLLM(batch=64) as server:
        server.url("bytes")   # http://127.0.0.1:<port>
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "recorded" / "embed"
sys.path.insert(0, str(ROOT / "server-fixtures"))

from fault_proxy import free_port  # noqa: E402
from nginx_proxy import NginxProxy, nginx_binary, nginx_conf  # noqa: E402

ENCODINGS = ("float", "base64", "bytes")
RECORDINGS = {"float": "embeddings_float", "base64": "embeddings_base64", "bytes": "embeddings_bytes_float32"}
STATIC = {"version": "version", "v1/models": "models", "openapi.json": "openapi", "health": "health"}

__all__ = ["ENCODINGS", "NginxVLLM", "nginx_binary"]


def _recorded(name: str) -> dict[str, Any]:
    response: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())["response"]
    return response


def _body(response: dict[str, Any]) -> bytes:
    if response["body_b64"] is not None:
        return base64.b64decode(response["body_b64"])
    return str(response["body_text"] or "").encode()


def _widened_usage(usage: dict[str, Any], recorded_rows: int, rows: int) -> dict[str, Any]:
    return {key: value if value is None else value * rows // recorded_rows for key, value in usage.items()}


def embeddings_answer(encoding: str, rows: int) -> tuple[bytes, dict[str, str]]:
    """The recorded ``/v1/embeddings`` answer in ``encoding`` widened to ``rows`` items: (body, headers
    beyond ``content-type``)."""
    response = _recorded(RECORDINGS[encoding])
    if encoding == "bytes":
        meta = json.loads(response["headers"]["metadata"])
        raw = _body(response)
        items = meta["data"]
        size = items[0]["end"] - items[0]["start"]
        recorded_rows = len(items)
        chunks, data = [], []
        for index in range(rows):
            source = items[index % recorded_rows]
            chunks.append(raw[source["start"] : source["end"]])
            data.append({**source, "index": index, "start": index * size, "end": (index + 1) * size})
        meta["usage"] = _widened_usage(meta["usage"], recorded_rows, rows)
        meta["data"] = data
        return b"".join(chunks), {"metadata": json.dumps(meta)}
    body = json.loads(_body(response))
    recorded_rows = len(body["data"])
    widened = copy.deepcopy(body)
    widened["data"] = [{**body["data"][i % recorded_rows], "index": i} for i in range(rows)]
    widened["usage"] = _widened_usage(body["usage"], recorded_rows, rows)
    return json.dumps(widened, separators=(",", ":")).encode(), {}


def recorded_vectors() -> np.ndarray:
    """The recorded answer's vectors (2 x 384 float32): row ``i`` of every answer is row ``i % 2``."""
    response = _recorded(RECORDINGS["float"])
    return np.asarray([item["embedding"] for item in json.loads(_body(response))["data"]], dtype=np.float32)


def _header_directives(name: str, value: str) -> str:
    """``add_header name value`` for nginx, whose config tokens end at 4 kB (a ``bytes`` answer's
    metadata for 64 rows is about 7 kB): the value is set in pieces and joined in the directive."""
    assert "'" not in value and "$" not in value and "\\" not in value, value
    pieces = [value[start : start + 3000] for start in range(0, len(value), 3000)]
    names = [f"${name}_{index}" for index in range(len(pieces))]
    sets = "".join(f"set {var} '{piece}'; " for var, piece in zip(names, pieces, strict=True))
    return f'{sets}add_header {name} "{"".join(names)}" always; '


class NginxVLLM(NginxProxy):
    """nginx with one ``server`` block per encoding (``float``, ``base64``, ``bytes``), each answering
    every ``POST /v1/embeddings`` with ``batch`` rows; ``start()`` / ``stop()`` / ``with``."""

    def __init__(self, batch: int, host: str = "127.0.0.1") -> None:
        super().__init__(("127.0.0.1", 9), ("127.0.0.1", 9), host=host)  # no upstream: nothing proxied
        self.batch = batch
        self.ports = {encoding: free_port(host) for encoding in ENCODINGS}

    def expected(self, rows: int) -> np.ndarray:
        """What a client must decode from ``rows // batch`` answers (float32, ``rows`` x 384)."""
        vectors = recorded_vectors()
        per_answer = vectors[np.arange(self.batch) % len(vectors)]
        return np.tile(per_answer, (rows // self.batch, 1))

    def config(self, folder: Path) -> str:
        blocks = []
        for encoding in ENCODINGS:
            root = folder / encoding
            (root / "v1").mkdir(parents=True)
            for path, name in STATIC.items():
                (root / path).write_bytes(_body(_recorded(name)))
            body, headers = embeddings_answer(encoding, self.batch)
            (root / "v1" / "embeddings").write_bytes(body)
            kind = "application/octet-stream" if encoding == "bytes" else "application/json"
            extra = "".join(_header_directives(name, value) for name, value in headers.items())
            blocks.append(
                f"""
    server {{ listen {self.host}:{self.ports[encoding]}; root {root}; access_log off;
        keepalive_requests 1000000; sendfile on; tcp_nodelay on; etag off;
        location / {{ default_type application/json; }}
        location = /health {{ default_type text/plain; }}
        location = /v1/embeddings {{ default_type {kind}; {extra}error_page 405 =200 $uri; }} }}"""
            )
        return nginx_conf(folder, "\n".join(blocks))


def main() -> None:
    """Run it in the foreground: ``python benchmarks/nginx_vllm.py [--batch 64]`` prints the URLs."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    with NginxVLLM(args.batch) as server:
        for encoding in ENCODINGS:
            print(encoding, server.url(encoding), flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
