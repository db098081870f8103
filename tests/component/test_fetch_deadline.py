"""``FetchLimits.deadline`` bounds a download over real HTTP on both clients: a host that sends one byte at
a time, each within the per-read timeout, still loses the connection at the deadline (issue 22, item 5:
the sync client used to check the time only between chunks, 0.8 s late here)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import FetchLimits

DEADLINE = 1.0
GAP = 0.9  # seconds between bytes: under the per-read timeout (the time left), over the deadline's rest
SLACK = 0.4


@pytest.fixture
def trickle_url() -> Iterator[str]:
    """A local HTTP host that answers 200 with a 100-byte body, sent one byte every ``GAP`` seconds."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    connections: list[threading.Thread] = []

    def answer(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            try:
                while not stop.wait(GAP):
                    connection.sendall(b"x")
            except OSError:  # the client hung up
                pass

    def serve() -> None:
        server.settimeout(0.05)  # to see ``stop``: closing a socket does not wake its accept()
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=answer, args=(connection,), daemon=True)
            connections.append(thread)
            thread.start()

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/talk.wav"
    stop.set()
    for thread in [acceptor, *connections]:
        thread.join(5)
    server.close()


def test_a_trickling_host_is_cut_off_at_the_deadline(make_client: Any, trickle_url: str) -> None:
    client = make_client(fetch_limits=FetchLimits(deadline=DEADLINE))
    started = time.monotonic()
    with pytest.raises(vt.InputFetchError, match=r"over the 1 s deadline"):
        client.transcribe(trickle_url)
    assert time.monotonic() - started < DEADLINE + SLACK
