"""vllm_tasks.integrations.lancedb against FakeVLLM and a real LanceDB table on a local folder: the table's
vectors are ``client.embed`` of its texts with the document prompt, ``table.search("...")`` embeds the query
with the query prompt through the same server (also from the table opened again, rebuilt from what it
recorded, which holds no API key), and a text the server refuses gets no vector while the others do."""

from __future__ import annotations

import json
from pathlib import Path

import lancedb
import numpy as np
import pytest
from lancedb.embeddings import get_registry
from lancedb.pydantic import LanceModel, Vector

import vllm_tasks as vt
from vllm_tasks.integrations.lancedb import VLLMEmbeddingFunction

from ..fakes import fake_like

DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "The Rhine flows north."]


def test_the_table_and_its_search_embed_through_the_server_with_their_prompts(tmp_path: Path) -> None:
    with fake_like("qwen3-embedding", api_key="secret-key") as fixture:
        url = fixture.fake.url
        get_registry().set_var("vllm_key", "secret-key")
        vllm = (
            get_registry()
            .get("vllm-tasks")
            .create(
                base_url=url,
                api_key="$var:vllm_key",
                query_prompt_name="query",
                document_prompt_name="document",
            )
        )

        class Docs(LanceModel):
            text: str = vllm.SourceField()
            vector: Vector(vllm.ndims()) = vllm.VectorField()  # type: ignore[valid-type]

        table = lancedb.connect(tmp_path).create_table("docs", schema=Docs)
        table.add([{"text": text} for text in DOCS])
        with vt.Client(url, api_key="secret-key") as client:
            documents = client.embed(DOCS, prompt_name="document").vectors
            plain = client.embed(DOCS).vectors
            query = client.embed(["capital of France?"], prompt_name="query").vectors[0]
        stored = np.array(table.to_arrow().column("vector").to_pylist(), np.float32)
        np.testing.assert_array_equal(stored, documents)
        assert not np.allclose(stored, plain)  # the document prompt was applied
        fixture.fake.clear_requests()
        reopened = lancedb.connect(tmp_path).open_table("docs")
        hit = reopened.search("capital of France?").limit(1).to_list()[0]
        sent = fixture.fake.received()[-1]
        assert (sent.path, sent.json["texts"], sent.json["input_type"]) == (
            "/v2/embed",
            ["capital of France?"],
            "query",
        )
        np.testing.assert_allclose(hit["vector"], documents[int(np.argmax(documents @ query))])
    recorded = reopened.schema.metadata[b"embedding_functions"].decode()
    assert "secret-key" not in recorded and json.loads(recorded)[0]["model"]["api_key"] == "$var:vllm_key"


def test_a_refused_text_gets_no_vector_and_a_query_error_is_typed(tmp_path: Path) -> None:
    with fake_like("embed") as fixture:
        vllm = VLLMEmbeddingFunction(base_url=fixture.fake.url, max_retries=0)
        texts = [DOCS[0], "word " * 600, None, DOCS[1]]
        vectors = vllm.compute_source_embeddings(texts)
        with vt.Client(fixture.fake.url) as client:
            expected = client.embed([DOCS[0], DOCS[1]]).vectors
        assert [v is None for v in vectors] == [False, True, True, False]
        np.testing.assert_array_equal(np.array([vectors[0], vectors[3]]), expected)
        with pytest.raises(vt.ContextLengthExceeded):
            vllm.compute_query_embeddings_with_retry("word " * 600)
        with pytest.raises(vt.InvalidInputError, match="prompt_name"):
            VLLMEmbeddingFunction(base_url=fixture.fake.url, query_prompt="q: ", query_prompt_name="query")
