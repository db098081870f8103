"""docs/scaling.md's nginx config, exactly as written there (only the replicas' addresses and the listen
port replaced), run by a real nginx in front of two FakeVLLM replicas: requests are spread over both, a
``bytes`` batch of 64 passes (``proxy_buffer_size``), a 2 MB audio upload passes
(``client_max_body_size``), and with one replica stopped every call still succeeds on the other.
No vLLM server: the replicas are fakes, so the test is about nginx's settings, not a model.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fault_proxy import free_port
from nginx_proxy import NginxProxy, nginx_binary, nginx_conf
from pytest_plugin import missing_component

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

SCALING = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def documented_config() -> str:
    """The one ```nginx block of docs/scaling.md."""
    [block] = re.findall(r"```nginx\n(.*?)```", SCALING.read_text(), flags=re.DOTALL)
    return block


class DocumentedNginx(NginxProxy):
    """nginx running docs/scaling.md's upstream and server blocks, in front of ``replicas``."""

    def __init__(self, replicas: list[FakeVLLM]) -> None:
        super().__init__(("127.0.0.1", replicas[0].port), ("127.0.0.1", replicas[0].port))
        self.ports = {"balancer": free_port(self.host)}
        block = documented_config()
        for name, replica in zip(("gpu-a:8000", "gpu-b:8000"), replicas, strict=True):
            assert name in block
            block = block.replace(name, f"127.0.0.1:{replica.port}")
        assert "listen 8080;" in block
        self.block = block.replace("listen 8080;", f"listen {self.host}:{self.ports['balancer']};")

    def config(self, folder: Path) -> str:
        return nginx_conf(folder, self.block)


def speech(seconds: float) -> bytes:
    """A WAV of ``seconds`` of noise (16 kHz, 16-bit): 32 kB a second, so 64 s is over nginx's default 1m."""
    samples = np.random.default_rng(0).uniform(-0.3, 0.3, int(16000 * seconds))
    buffer = io.BytesIO()
    sf.write(buffer, samples, 16000, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def test_the_documented_nginx_config_balances_two_replicas(caplog: pytest.LogCaptureFixture) -> None:
    if nginx_binary() is None:
        missing_component(
            "nginx is not installed: run server-fixtures/setup as root (apt-get install nginx-light)"
        )
    texts = [f"text {i} about {'rivers' if i % 2 else 'bridges'}" for i in range(320)]
    with FakeVLLM() as a, FakeVLLM() as b, DocumentedNginx([a, b]) as nginx:
        url = nginx.url("balancer")
        with vt.Client(url) as client, caplog.at_level(logging.WARNING, logger="vllm_tasks"):
            vectors = client.embed(texts, batch_size=64, concurrency=4, encoding_format="bytes").vectors
            np.testing.assert_allclose(vectors, np.stack([a.vector(t) for t in texts]), atol=1e-6)
            sent = a.received("/v1/embeddings") + b.received("/v1/embeddings")
            assert (
                sorted(len(r.json["input"]) for r in sent) == [64] * 5
            )  # no 502, no re-sent smaller batches
            assert a.received("/v1/embeddings") and b.received("/v1/embeddings")  # both replicas used
            audio = speech(64)
            assert len(audio) > 2_000_000
            result = client.transcribe(audio, prepare="never", chunking="server")
            assert result.text == "The quick brown fox jumped over the lazy dog. It was not amused."
            assert len(a.received("/v1/audio/transcriptions") + b.received("/v1/audio/transcriptions")) == 1
        assert "proxy_buffer_size" not in caplog.text
        a.stop()  # a replica goes away: nginx sends everything to the other one
        b.clear_requests()
        with vt.Client(url) as client:
            for _ in range(4):
                np.testing.assert_allclose(client.embed(texts[:8]).vectors, vectors[:8], atol=1e-6)
        assert len(b.received("/v1/embeddings")) == 4
