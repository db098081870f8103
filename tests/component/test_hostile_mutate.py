"""FakeVLLM.mutate: the normal answer rewritten before it is sent, on the paths and times asked."""

from __future__ import annotations

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM, Reply


def html(reply: Reply) -> Reply:
    return Reply(200, b"<html>Sign in</html>", {"content-type": "text/html"})


def test_rewrites_the_matching_answers_then_answers_normally() -> None:
    with FakeVLLM() as fake, httpx.Client(base_url=fake.url) as http:
        fault = fake.mutate(html, path="/tokenize", times=2)
        body = {"model": "fake-model", "prompt": "hello"}
        first, second, third = (http.post("/tokenize", json=body) for _ in range(3))
        assert http.get("/version").headers["content-type"] == "application/json"
    assert [first.text, second.text] == ["<html>Sign in</html>"] * 2
    assert fault.hits == 2 and third.json()["tokens"]


def test_gets_the_normal_answer_and_its_headers() -> None:
    seen: list[Reply] = []

    def spy(reply: Reply) -> Reply:
        seen.append(reply)
        return Reply(reply.status, reply.body, {**reply.headers, "x-seen": "1"})

    with FakeVLLM() as fake, vt.Client(fake.url, max_retries=0) as client:
        fake.mutate(spy, path="/v1/embeddings", times=None)
        assert client.embed(["a", "b"]).vectors.shape == (2, 384)
        client.embed(["c"])
    assert len(seen) == 2 and all(r.status == 200 and "metadata" in r.headers for r in seen)


def test_a_failing_mutation_is_answered_500_naming_it() -> None:
    def broken(reply: Reply) -> Reply:
        raise ValueError("boom")

    with FakeVLLM() as fake, vt.Client(fake.url, max_retries=0) as client:
        fake.mutate(broken, path="/v1/embeddings")
        with pytest.raises(vt.InternalServerError, match="boom"):
            client.embed(["a"])


def test_refuses_what_is_not_callable() -> None:
    with FakeVLLM() as fake, pytest.raises(vt.InvalidInputError, match="mutation"):
        fake.mutate("html")  # type: ignore[arg-type]
