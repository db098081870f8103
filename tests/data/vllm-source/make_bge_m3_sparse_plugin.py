"""Write bge_m3_sparse_plugin.json: what ``/pooling`` answers a plugin request on a vLLM server started with
``--io-processor-plugin bge_m3_sparse_plugin``, made by vLLM's own plugin code, not by a live server.

The plugin (vLLM PR #34214) is in vLLM's source distribution only, ``tests/plugins/bge_m3_sparse_plugin/``
(the same files in the 0.32.0, 0.33.0 and 0.34.0 sdists; no wheel ships it). This script runs its
``BgeM3SparseEmbeddingsProcessor.post_process`` on the per-token weights of the tiny ``bge-m3`` fixture
(``relu(sparse_linear(h))`` from transformers on the same weights, the BOS and EOS rows left out as vLLM's
``BOSEOSFilter`` does), wraps the result in vLLM's ``IOProcessorResponse`` and serialises it as vLLM's
``create_json_response`` does (orjson of ``model_dump()``).

    <fixture venv>/bin/python tests/data/vllm-source/make_bge_m3_sparse_plugin.py \\
        <sdist>/tests/plugins/bge_m3_sparse_plugin <cache>/models/bge-m3-tiny
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

TEXTS = ["hello world hello", "world hello world"]
REQUEST_ID = "pool-0123456789abcdef"
CREATED_AT = 1796453727


def main(plugin_dir: Path, model_dir: Path) -> None:
    sys.path.insert(0, str(plugin_dir))
    import orjson
    import torch
    from bge_m3_sparse_processor.sparse_embeddings_processor import BgeM3SparseEmbeddingsProcessor
    from bge_m3_sparse_processor.types import SparseEmbeddingCompletionRequestMixin
    from transformers import AutoTokenizer, XLMRobertaModel
    from vllm.entrypoints.pooling.pooling.protocol import IOProcessorResponse

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = XLMRobertaModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    sparse = torch.load(model_dir / "sparse_linear.pt", map_location="cpu")
    hidden_size = model.config.hidden_size

    processor = object.__new__(BgeM3SparseEmbeddingsProcessor)
    processor.offline_requests = []
    processor.online_requests = {}
    processor.renderer = SimpleNamespace(get_tokenizer=lambda: tokenizer)
    processor.default_pooling_params = {}
    processor.embed_dimensions = hidden_size

    data = {"input": TEXTS, "embed_task": "sparse", "return_tokens": True}
    processor.pre_process(prompt=SparseEmbeddingCompletionRequestMixin(**data), request_id=REQUEST_ID)
    outputs = []
    for text in TEXTS:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0]
            weights = torch.relu(torch.nn.functional.linear(hidden, sparse["weight"], sparse["bias"]))[:, 0]
        dense = torch.nn.functional.normalize(hidden[0], dim=-1)  # the embed half: CLS, normalised
        row = torch.cat([dense, weights[1:-1]])  # BgeM3Pooler: embed, then token_classify without BOS/EOS
        outputs.append(SimpleNamespace(prompt_token_ids=ids[0].tolist(), outputs=SimpleNamespace(data=row)))
    result = processor.post_process(outputs, request_id=REQUEST_ID)
    response = IOProcessorResponse(request_id=REQUEST_ID, created_at=CREATED_AT, data=result)
    body = orjson.dumps(response.model_dump(), option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    exchange = {
        "fixture": "bge-m3",
        "made_from": "vLLM's source (tests/plugins/bge_m3_sparse_plugin, sdists 0.32.0-0.34.0), "
        "not a live server",
        "request": {
            "method": "POST",
            "path": "/pooling",
            "json": {"model": "bge-m3-tiny", "task": "plugin", "data": data},
            "headers": {"Content-Type": "application/json"},
        },
        "response": {
            "status": 200,
            "headers": {"content-type": "application/json"},
            "body_text": body.decode(),
            "body_b64": None,
        },
    }
    out = Path(__file__).with_name("bge_m3_sparse_plugin.json")
    out.write_text(json.dumps(exchange, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
