"""A fast fake vLLM embedding server that replays precomputed vectors, so a client is the bottleneck.

Answers /health, /version, /v1/models, /openapi.json (404) and /v1/embeddings in the float, base64,
bytes and bytes_only formats exactly as vLLM 0.32 shapes them (384-dim float32, like the `embed`
fixture). Only for benchmarks; binds to 127.0.0.1. ``--latency S`` adds S seconds to every embedding
answer (a replica of fixed speed, for benchmarks/embed_jobs.py).

    python benchmarks/fake_vllm.py --port 8123 [--latency 0.1]
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIM = 384
VECTORS = np.random.default_rng(0).standard_normal((1024, DIM)).astype("<f4")
VECTORS /= np.linalg.norm(VECTORS, axis=1, keepdims=True)
B64 = [base64.b64encode(v.tobytes()).decode() for v in VECTORS]
FLOATS = [json.dumps(v.tolist()) for v in VECTORS]
RAW = VECTORS.tobytes()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    latency = 0.0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, b"")
        elif self.path == "/version":
            self._send(200, b'{"version":"0.32.0"}')
        elif self.path == "/v1/models":
            self._send(200, b'{"object":"list","data":[{"id":"minilm","root":"fake","max_model_len":256}]}')
        else:
            self._send(404, b'{"detail":"Not Found"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", 0))
        request = json.loads(self.rfile.read(length))
        if self.latency:
            time.sleep(self.latency)
        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        n = len(texts)
        fmt = request.get("encoding_format", "float")
        usage = {"prompt_tokens": 4 * n, "total_tokens": 4 * n}
        if fmt in ("bytes", "bytes_only"):
            item = DIM * 4
            data = [
                {
                    "index": i,
                    "embed_dtype": "float32",
                    "endianness": "native",
                    "start": i * item,
                    "end": (i + 1) * item,
                    "shape": [DIM],
                }
                for i in range(n)
            ]
            meta = json.dumps({"id": "embd-x", "created": 0, "model": "minilm", "data": data, "usage": usage})
            extra = {"metadata": meta} if fmt == "bytes" else {}
            self._send(200, RAW[: n * item], "application/octet-stream", **extra)
            return
        table = [json.dumps(text) for text in B64[:n]] if fmt == "base64" else FLOATS[:n]
        items = ",".join(f'{{"index":{i},"object":"embedding","embedding":{table[i]}}}' for i in range(n))
        head = '{"id":"embd-x","object":"list","created":0,"model":"minilm"'
        body = f'{head},"data":[{items}],"usage":{json.dumps(usage)}}}'
        self._send(200, body.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each embedding answer")
    args = parser.parse_args()
    Handler.latency = args.latency
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
