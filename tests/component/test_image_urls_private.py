"""``FetchLimits(refuse_private=True)`` covers the image URLs of ``embed``, ``embed_v2``, ``pool``, ``rerank``
and ``score`` (which the server would otherwise fetch, unchecked): the client fetches each one itself,
under its ``FetchLimits`` (the address checked is the one connected to), and sends it as a ``data:`` URL;
an image host on 127.0.0.1 is refused before it is reached and before anything is sent to the server.
Without ``refuse_private`` the URL goes to the server as it is."""

from __future__ import annotations

import ipaddress
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import FetchLimits
from vllm_tasks.testing import FakeVLLM

PNG = b"\x89PNG\r\n\x1a\n" + b"fetched"


class ImageHost(ThreadingHTTPServer):
    """A local image host that counts its GETs."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.paths: list[str] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _Answer(BaseHTTPRequestHandler):
    server: ImageHost

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)

    def log_message(self, *_args: Any) -> None:
        """Quiet."""


@pytest.fixture
def host() -> Iterator[ImageHost]:
    server = ImageHost()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def part(url: str, kind: str = "image_url") -> dict[str, Any]:
    return {"type": kind, kind: {"url": url}}


CALLS: dict[str, Callable[[Any, str], Any]] = {
    "embed(images)": lambda client, url: client.embed(images=[url]),
    "embed(messages)": lambda client, url: client.embed(messages=[{"role": "user", "content": [part(url)]}]),
    "embed_v2(images)": lambda client, url: client.embed_v2(images=[url]),
    "embed_v2(inputs)": lambda client, url: client.embed_v2(inputs=[{"content": [part(url)]}]),
    "pool(images)": lambda client, url: client.pool(images=[url]),
    "rerank": lambda client, url: client.rerank("q", ["text", {"content": [part(url)]}]),
    "score": lambda client, url: client.score({"content": [part(url)]}, ["text"]),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_an_image_url_on_a_private_address_is_refused_before_anything_is_sent(
    call: Callable[[Any, str], Any], make_client: Any, fake_vllm: FakeVLLM, host: ImageHost
) -> None:
    client = make_client(fake_vllm.url, fetch_limits=FetchLimits(refuse_private=True, deadline=5))
    with pytest.raises(vt.InputFetchError, match="non-public address") as caught:
        call(client, f"{host.url}/cat.png")
    assert caught.value.kind == "image_fetch" and caught.value.source == f"{host.url}/cat.png"
    assert host.paths == []
    assert [
        r for r in fake_vllm.received() if r.path not in ("/v1/models", "/version", "/openapi.json")
    ] == []


def test_with_refuse_private_the_client_fetches_the_image_and_sends_its_bytes(
    make_client: Any, fake_vllm: FakeVLLM, host: ImageHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(lambda _address: True))
    client = make_client(fake_vllm.url, fetch_limits=FetchLimits(refuse_private=True, deadline=5))
    url = f"{host.url}/cat.png"
    client.embed(images=[url, url])
    assert host.paths == ["/cat.png"]  # once for both
    (request,) = fake_vllm.received("/v1/embeddings")
    sent = json.dumps(request.json["messages"])
    assert url not in sent and sent.count("data:image/png;base64,iVBORw0KGgpmZXRjaGVk") == 2


def test_without_refuse_private_the_server_fetches_the_url(
    make_client: Any, fake_vllm: FakeVLLM, host: ImageHost
) -> None:
    url = f"{host.url}/cat.png"
    make_client(fake_vllm.url).embed(images=[url])  # FakeVLLM fetches nothing: it embeds the URL's text
    assert host.paths == []
    (request,) = fake_vllm.received("/v1/embeddings")
    assert url in json.dumps(request.json["messages"])


@pytest.mark.parametrize("kind", ["audio_url", "video_url"])
def test_with_refuse_private_a_media_url_only_the_server_fetches_is_refused(
    kind: str, make_client: Any, fake_vllm: FakeVLLM
) -> None:
    client = make_client(fake_vllm.url, fetch_limits=FetchLimits(refuse_private=True))
    with pytest.raises(vt.InputFetchError, match="the client fetches image URLs only") as caught:
        client.embed(messages=[{"role": "user", "content": [part("https://cdn.test/a.bin", kind)]}])
    assert caught.value.field == "messages[0][0].content[0]"


def test_with_refuse_private_ocr_does_not_let_the_server_fetch_a_url(
    make_client: Any, fake_vllm: FakeVLLM, host: ImageHost
) -> None:
    client = make_client(fake_vllm.url, fetch_limits=FetchLimits(refuse_private=True))
    with pytest.raises(vt.InvalidInputError, match="refuse_private") as caught:
        client.ocr(f"{host.url}/page.png", fetch_urls=False)
    assert caught.value.field == "fetch_urls"
    assert host.paths == [] and fake_vllm.received("/v1/chat/completions") == []
