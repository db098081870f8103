#!/usr/bin/env python3
"""Record real vLLM responses from the CPU fixtures into tests/recorded/<fixture>/<name>.json.

    python3 server-fixtures/record.py                       # start each fixture in turn, record, stop it
    python3 server-fixtures/record.py embed rerank          # only these fixtures
    python3 server-fixtures/record.py embed --url http://127.0.0.1:8000   # use a running server

Standard library only (urllib). One JSON file per exchange:

    {"fixture": str, "vllm_version": str,
     "request":  {"method": str, "path": str, "json": <obj|null>, "headers": {name: value}},
     "response": {"status": int, "headers": {lowercased name: value},
                  "body_text": str|null, "body_b64": str|null}}

``body_b64`` is used for binary bodies (application/octet-stream, e.g. encoding_format=bytes), otherwise
``body_text`` holds the body as received. Files are rewritten on each run; exchanges are defined in
``EXCHANGES`` below (inputs kept short so the files stay small).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fixture_table import FIXTURES, TEST_API_KEY  # noqa: E402
from launcher import FixtureServer  # noqa: E402

OUT_ROOT = HERE.parent / "tests" / "recorded"

TEXTS = ["hello world", "vLLM serves embeddings"]
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "France is in Europe."]
LONG_TEXT = " ".join(["token"] * 300)  # > 256 tokens for MiniLM (max-model-len 256)


def _ex(name, method, path, body=None, headers=None):
    return {"name": name, "method": method, "path": path, "json": body, "headers": headers or {}}


def _embed_exchanges(model: str) -> list[dict]:
    ex = [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("health", "GET", "/health"),
        _ex("embeddings_float", "POST", "/v1/embeddings", {"model": model, "input": TEXTS}),
        _ex("embeddings_float_single", "POST", "/v1/embeddings", {"model": model, "input": "hello world"}),
        _ex("embeddings_float_no_model", "POST", "/v1/embeddings", {"input": ["hello world"]}),
        _ex(
            "embeddings_base64",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "encoding_format": "base64"},
        ),
        _ex(
            "embeddings_base64_float16_big",
            "POST",
            "/v1/embeddings",
            {
                "model": model,
                "input": TEXTS,
                "encoding_format": "base64",
                "embed_dtype": "float16",
                "endianness": "big",
            },
        ),
    ]
    for dtype in ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"):
        ex.append(
            _ex(
                f"embeddings_bytes_{dtype}",
                "POST",
                "/v1/embeddings",
                {"model": model, "input": TEXTS, "encoding_format": "bytes", "embed_dtype": dtype},
            )
        )
    ex += [
        _ex(
            "embeddings_bytes_float32_big",
            "POST",
            "/v1/embeddings",
            {
                "model": model,
                "input": TEXTS,
                "encoding_format": "bytes",
                "embed_dtype": "float32",
                "endianness": "big",
            },
        ),
        _ex(
            "embeddings_bytes_float16_little",
            "POST",
            "/v1/embeddings",
            {
                "model": model,
                "input": TEXTS,
                "encoding_format": "bytes",
                "embed_dtype": "float16",
                "endianness": "little",
            },
        ),
        _ex(
            "embeddings_bytes_only",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "encoding_format": "bytes_only", "embed_dtype": "float32"},
        ),
        _ex(
            "embeddings_truncate_ok",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": [LONG_TEXT], "truncate_prompt_tokens": 8},
        ),
        _ex(
            "v2_embed_float",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "embedding_types": ["float"]},
        ),
        _ex(
            "v2_embed_binary",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "embedding_types": ["binary"]},
        ),
        _ex(
            "v2_embed_ubinary",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "embedding_types": ["ubinary"]},
        ),
        _ex(
            "v2_embed_base64",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "embedding_types": ["base64"]},
        ),
        _ex(
            "v2_embed_all_types",
            "POST",
            "/v2/embed",
            {
                "model": model,
                "texts": ["hello world"],
                "embedding_types": ["float", "binary", "ubinary", "base64"],
            },
        ),
        _ex("v2_embed_default", "POST", "/v2/embed", {"model": model, "texts": ["hello world"]}),
        _ex("score", "POST", "/score", {"model": model, "text_1": QUERY, "text_2": DOCS}),
        _ex(
            "score_queries_documents",
            "POST",
            "/score",
            {"model": model, "queries": [QUERY], "documents": DOCS},
        ),
        _ex("rerank", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex(
            "rerank_top_n", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS, "top_n": 2}
        ),
        _ex("pooling", "POST", "/pooling", {"model": model, "input": "hello world"}),
        _ex("tokenize", "POST", "/tokenize", {"model": model, "prompt": "hello world"}),
        _ex(
            "tokenize_strs",
            "POST",
            "/tokenize",
            {"model": model, "prompt": "hello world", "return_token_strs": True},
        ),
        _ex("detokenize", "POST", "/detokenize", {"model": model, "tokens": [101, 7592, 2088, 102]}),
        # --- errors ---
        _ex(
            "error_dimensions_not_matryoshka",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "dimensions": 128},
        ),
        _ex("error_context_length", "POST", "/v1/embeddings", {"model": model, "input": [LONG_TEXT]}),
        _ex(
            "error_truncate_prompt_tokens_too_big",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": ["hello"], "truncate_prompt_tokens": 1000},
        ),
        _ex("error_unknown_model", "POST", "/v1/embeddings", {"model": "no-such-model", "input": ["hello"]}),
        _ex(
            "error_unknown_model_tokenize", "POST", "/tokenize", {"model": "no-such-model", "prompt": "hello"}
        ),
        _ex("error_empty_input", "POST", "/v1/embeddings", {"model": model, "input": []}),
        _ex(
            "error_normalize",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": ["hello"], "normalize": True},
        ),
        _ex(
            "error_rerank_top_n_negative",
            "POST",
            "/rerank",
            {"model": model, "query": QUERY, "documents": DOCS, "top_n": -1},
        ),
        _ex(
            "error_score_lengths",
            "POST",
            "/score",
            {"model": model, "text_1": ["a", "b"], "text_2": ["x", "y", "z"]},
        ),
        _ex(
            "error_v2_embed_int8",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "embedding_types": ["int8"]},
        ),
        _ex(
            "error_v2_embed_input_type",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "input_type": "search_query"},
        ),
        _ex("error_404_transcriptions", "POST", "/v1/audio/transcriptions", None),
        _ex(
            "error_404_chat_completions",
            "POST",
            "/v1/chat/completions",
            {"model": model, "messages": [{"role": "user", "content": "hi"}]},
        ),
        _ex("error_404_classify", "POST", "/classify", {"model": model, "input": ["hello"]}),
        _ex("error_405_get_embeddings", "GET", "/v1/embeddings"),
        _ex(
            "error_wrong_content_type",
            "POST",
            "/v1/embeddings",
            None,
            {"Content-Type": "text/plain", "_raw_body": "hello"},
        ),
    ]
    return ex


def _mrl_exchanges(model: str) -> list[dict]:
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex(
            "embeddings_dimensions_128",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "dimensions": 128},
        ),
        _ex(
            "embeddings_dimensions_256_base64",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "dimensions": 256, "encoding_format": "base64"},
        ),
        _ex(
            "v2_embed_output_dimension_128",
            "POST",
            "/v2/embed",
            {"model": model, "texts": TEXTS, "output_dimension": 128, "embedding_types": ["float"]},
        ),
        _ex(
            "error_dimensions_100",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "dimensions": 100},
        ),
        _ex(
            "error_dimensions_512",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": TEXTS, "dimensions": 512},
        ),
        _ex(
            "error_dimensions_0", "POST", "/v1/embeddings", {"model": model, "input": TEXTS, "dimensions": 0}
        ),
    ]


def _rerank_exchanges(model: str) -> list[dict]:
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("score", "POST", "/score", {"model": model, "text_1": QUERY, "text_2": DOCS}),
        _ex(
            "score_no_activation",
            "POST",
            "/score",
            {"model": model, "text_1": QUERY, "text_2": DOCS, "use_activation": False},
        ),
        _ex("rerank", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex(
            "rerank_top_n", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS, "top_n": 1}
        ),
        _ex("v1_rerank", "POST", "/v1/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex("v2_rerank", "POST", "/v2/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex("classify", "POST", "/classify", {"model": model, "input": TEXTS}),
        _ex("pooling", "POST", "/pooling", {"model": model, "input": "hello world"}),
        _ex("error_embeddings_on_cross_encoder", "POST", "/v1/embeddings", {"model": model, "input": TEXTS}),
        _ex("error_v2_embed_on_cross_encoder", "POST", "/v2/embed", {"model": model, "texts": TEXTS}),
        _ex(
            "error_rerank_max_tokens_per_doc",
            "POST",
            "/rerank",
            {"model": model, "query": QUERY, "documents": DOCS, "max_tokens_per_doc": 1000},
        ),
        _ex(
            "error_unknown_model",
            "POST",
            "/rerank",
            {"model": "no-such-model", "query": QUERY, "documents": DOCS},
        ),
    ]


def _late_interaction_exchanges(model: str) -> list[dict]:
    """The exchanges tests/unit/test_scoring.py replays, by the names it uses."""
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("pooling_probe", "POST", "/pooling", {"model": model, "input": "a"}),
        _ex("pooling", "POST", "/pooling", {"model": model, "input": [QUERY, *DOCS]}),
        _ex("score", "POST", "/score", {"model": model, "queries": QUERY, "documents": DOCS}),
        _ex("rerank", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex("error_embeddings", "POST", "/v1/embeddings", {"model": model, "input": ["hello"]}),
        _ex("error_v2_embed", "POST", "/v2/embed", {"model": model, "texts": ["hello"]}),
        _ex(
            "error_pooling_task_embed",
            "POST",
            "/pooling",
            {"model": model, "input": "hello", "task": "embed"},
        ),
    ]


def _listwise_exchanges(model: str) -> list[dict]:
    """jina-reranker-v3's architecture: the probe's one input refused, two read as one list."""
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("error_pooling_one_input", "POST", "/pooling", {"model": model, "input": "a"}),
        _ex("pooling_list", "POST", "/pooling", {"model": model, "input": ["a", "b"]}),
        _ex("rerank", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex("score", "POST", "/score", {"model": model, "queries": QUERY, "documents": DOCS}),
        _ex("score_zipped", "POST", "/score", {"model": model, "queries": DOCS, "documents": DOCS}),
        _ex("error_embeddings", "POST", "/v1/embeddings", {"model": model, "input": ["hello"]}),
        _ex(
            "error_rerank_too_long",
            "POST",
            "/rerank",
            {"model": model, "query": QUERY, "documents": [" ".join(["token"] * 3000)] * 3},
        ),
    ]


def _qwen3_embedding_exchanges(model: str) -> list[dict]:
    """Qwen3-Embedding's layout: its sentence-transformers prompts serve /v2/embed's input_type."""
    v2 = {"model": model, "texts": TEXTS, "embedding_types": ["base64"]}
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("embeddings_float", "POST", "/v1/embeddings", {"model": model, "input": TEXTS}),
        _ex("v2_embed_query", "POST", "/v2/embed", {**v2, "input_type": "query"}),
        _ex("v2_embed_query_16", "POST", "/v2/embed", {**v2, "input_type": "query", "output_dimension": 16}),
        _ex("error_v2_embed_unknown_input_type", "POST", "/v2/embed", {**v2, "input_type": "passage"}),
    ]


def _splade_exchanges(model: str) -> list[dict]:
    """SPLADE: one vocabulary-wide row per input (raw bytes, as embed_sparse fetches it), a token string."""
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex(
            "embeddings_bytes",
            "POST",
            "/v1/embeddings",
            {"model": model, "input": ["hello world"], "encoding_format": "bytes"},
        ),
        _ex("detokenize_one", "POST", "/detokenize", {"model": model, "tokens": [2075]}),
    ]


def _bge_m3_exchanges(model: str) -> list[dict]:
    """BGE-M3 with token_classify active: a prompt's token ids, then their lexical weights from /pooling."""
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex(
            "tokenize",
            "POST",
            "/tokenize",
            {
                "model": model,
                "prompt": "hello world hello",
                "add_special_tokens": True,
                "return_token_strs": True,
            },
        ),
        _ex(
            "pooling_token_classify",
            "POST",
            "/pooling",
            {"model": model, "input": [[0, 7596, 2092, 7596, 2]], "task": "token_classify"},
        ),
        _ex("error_embeddings", "POST", "/v1/embeddings", {"model": model, "input": ["hello"]}),
    ]


def _api_key_exchanges(model: str) -> list[dict]:
    good = {"Authorization": f"Bearer {TEST_API_KEY}"}
    bad = {"Authorization": "Bearer wrong-key"}
    return [
        _ex("version", "GET", "/version"),
        _ex("health_no_key", "GET", "/health"),
        _ex("error_401_models_no_key", "GET", "/v1/models"),
        _ex("error_401_models_wrong_key", "GET", "/v1/models", None, bad),
        _ex("models_with_key", "GET", "/v1/models", None, good),
        _ex("error_401_embeddings_no_key", "POST", "/v1/embeddings", {"model": model, "input": ["hello"]}),
        _ex("embeddings_with_key", "POST", "/v1/embeddings", {"model": model, "input": ["hello"]}, good),
        _ex(
            "error_401_missing_route_no_key", "POST", "/v1/chat/completions", {"model": model, "messages": []}
        ),
        _ex(
            "rerank_unguarded_no_key", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}
        ),
        _ex(
            "error_401_v1_rerank_no_key",
            "POST",
            "/v1/rerank",
            {"model": model, "query": QUERY, "documents": DOCS},
        ),
    ]


def _tiny_png(width: int = 64, height: int = 48) -> bytes:
    """A grayscale PNG (white page, one black bar) written with the standard library only."""
    import struct
    import zlib

    rows = b"".join(
        b"\x00" + bytes(0 if 8 <= y < 14 and 8 <= x < 56 else 255 for x in range(width))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


OCR_XARGS = {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]}
OCR_MARKDOWN = "<|grounding|>Convert the document to markdown."


def _ocr_chat(model: str, url: str, prompt: str, max_tokens: int, xargs: dict | None) -> dict:
    body: dict = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": url}},
                    {"type": "text", "text": prompt},
                ],
            }
        ],
        "temperature": 0.0,
        "skip_special_tokens": False,
        "max_tokens": max_tokens,
    }
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return body


def _ngram_check(model: str) -> dict:
    return {
        "messages": [{"role": "user", "content": "."}],
        "max_tokens": 1,
        "vllm_xargs": {"ngram_size": 0},
        "model": model,
    }


def _ocr_exchanges(model: str) -> list[dict]:
    url = "data:image/png;base64," + base64.b64encode(_tiny_png()).decode()
    garbage = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 4).decode()
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("chat_ngram_check_400", "POST", "/v1/chat/completions", _ngram_check(model)),
        _ex(
            "chat_markdown",
            "POST",
            "/v1/chat/completions",
            _ocr_chat(model, url, OCR_MARKDOWN, 40, OCR_XARGS),
        ),
        _ex(
            "chat_markdown_token_ids",
            "POST",
            "/v1/chat/completions",
            {**_ocr_chat(model, url, OCR_MARKDOWN, 8, OCR_XARGS), "return_token_ids": True},
        ),
        _ex(
            "chat_markdown_no_xargs",
            "POST",
            "/v1/chat/completions",
            _ocr_chat(model, url, OCR_MARKDOWN, 40, None),
        ),
        _ex(
            "error_garbage_image",
            "POST",
            "/v1/chat/completions",
            _ocr_chat(model, garbage, OCR_MARKDOWN, 8, OCR_XARGS),
        ),
    ]


def _ocr_no_processor_exchanges(model: str) -> list[dict]:
    return [
        _ex("version", "GET", "/version"),
        _ex("chat_ngram_check_200", "POST", "/v1/chat/completions", _ngram_check(model)),
    ]


#: vllm_tasks.score_template's pair: the SDK's check compares /rerank's tokens for it with /tokenize of both
#: joined.
TEMPLATE_CHECK = ("Which city is the capital of France?", "Paris is the capital of France.")


def _qwen3_reranker_exchanges(model: str) -> list[dict]:
    """Qwen3-Reranker (with or without its score template): what the SDK's scorer probe, scoring calls and
    score-template check send."""
    query, document = TEMPLATE_CHECK
    instructed = {"model": model, "query": QUERY, "documents": DOCS, "instruction": "Find a city"}
    joined = query + document
    return [
        _ex("version", "GET", "/version"),
        _ex("models", "GET", "/v1/models"),
        _ex("openapi", "GET", "/openapi.json"),
        _ex("pooling_probe", "POST", "/pooling", {"model": model, "input": "a"}),
        _ex("rerank", "POST", "/rerank", {"model": model, "query": QUERY, "documents": DOCS}),
        _ex("rerank_instruction", "POST", "/rerank", instructed),
        _ex("score", "POST", "/score", {"model": model, "queries": QUERY, "documents": DOCS}),
        _ex("classify", "POST", "/classify", {"model": model, "input": TEXTS}),
        _ex(
            "template_check_rerank",
            "POST",
            "/rerank",
            {"model": model, "query": query, "documents": [document]},
        ),
        _ex(
            "template_check_tokenize",
            "POST",
            "/tokenize",
            {"model": model, "prompt": joined, "add_special_tokens": False},
        ),
        _ex(
            "template_check_tokenize_special",
            "POST",
            "/tokenize",
            {"model": model, "prompt": joined, "add_special_tokens": True},
        ),
    ]


EXCHANGES = {
    "ocr": _ocr_exchanges,
    "ocr-no-processor": _ocr_no_processor_exchanges,
    "embed": _embed_exchanges,
    "embed-mrl": _mrl_exchanges,
    "rerank": _rerank_exchanges,
    "api-key": _api_key_exchanges,
    "late-interaction": _late_interaction_exchanges,
    "listwise": _listwise_exchanges,
    "qwen3-embedding": _qwen3_embedding_exchanges,
    "qwen3-reranker": _qwen3_reranker_exchanges,
    "qwen3-reranker-no-template": _qwen3_reranker_exchanges,
    "splade": _splade_exchanges,
    "bge-m3": _bge_m3_exchanges,
}


def call(base_url: str, ex: dict, timeout: float = 120.0) -> dict:
    headers = dict(ex["headers"])
    raw = headers.pop("_raw_body", None)
    data = None
    if raw is not None:
        data = raw.encode()
    elif ex["json"] is not None:
        data = json.dumps(ex["json"]).encode()
        headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(base_url + ex["path"], data=data, method=ex["method"], headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
        status, resp_headers, body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, resp_headers, body = e.code, e.headers, e.read()
    hdrs = {k.lower(): v for k, v in resp_headers.items()}
    binary = hdrs.get("content-type", "").startswith("application/octet-stream")
    if not binary:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            binary = True
    recorded_headers = {k: v for k, v in headers.items()}
    if raw is not None:
        recorded_headers["_raw_body"] = raw
    return {
        "request": {
            "method": ex["method"],
            "path": ex["path"],
            "json": ex["json"],
            "headers": recorded_headers,
        },
        "response": {
            "status": status,
            "headers": hdrs,
            "body_text": None if binary else text,
            "body_b64": base64.b64encode(body).decode() if binary else None,
        },
    }


def record_fixture(name: str, base_url: str, out_root: Path) -> list[Path]:
    model = FIXTURES[name].served_model_name
    version = json.loads(urllib.request.urlopen(base_url + "/version", timeout=30).read())["version"]
    out_dir = out_root / name
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for ex in EXCHANGES[name](model):
        rec = {"fixture": name, "vllm_version": version, **call(base_url, ex)}
        path = out_dir / f"{ex['name']}.json"
        path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
        print(f"  {name}/{ex['name']}: {rec['response']['status']}", flush=True)
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="*", default=list(EXCHANGES), help="fixtures to record (default: all)")
    ap.add_argument("--url", help="use this running server (only with one fixture name)")
    ap.add_argument("--out", type=Path, default=OUT_ROOT)
    args = ap.parse_args()
    if args.url and len(args.fixtures) != 1:
        ap.error("--url needs exactly one fixture name")
    for name in args.fixtures:
        if args.url:
            record_fixture(name, args.url.rstrip("/"), args.out)
            continue
        with FixtureServer(name) as srv:
            print(f"[record] {name} up at {srv.base_url} in {srv.start_seconds:.1f} s", flush=True)
            record_fixture(name, srv.base_url, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
