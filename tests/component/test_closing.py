"""A client's ``close()`` and the requests a failed call left running (the sync client's worker threads)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt


class SlowDocsServer:
    """``/v1/models`` refuses the key at once; ``/version`` and ``/openapi.json`` answer after ``delay``."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.answered: list[str] = []
        self.released = threading.Event()
        self.others_arrived = threading.Barrier(2)  # the two slow requests, each on its own thread
        self.in_flight = threading.Event()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    # Refused once the other two are in flight: under load a worker thread may start late,
                    # and a request not yet started when the call fails is (rightly) never sent.
                    owner.in_flight.wait(2.0)
                    self._answer(401, {"error": {"message": "bad key", "type": "Unauthorized", "code": 401}})
                    return
                try:
                    owner.others_arrived.wait(2.0)
                    owner.in_flight.set()
                except threading.BrokenBarrierError:
                    pass
                owner.released.wait(owner.delay)
                # Recorded before the answer is written: once the client has read it, the test may look.
                owner.answered.append(self.path)
                self._answer(200, {"version": "0.20.0"} if self.path == "/version" else {"paths": {}})

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.released.set()  # a request still waiting is answered: no client thread outlives the test
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def slow_docs(request: pytest.FixtureRequest) -> Iterator[SlowDocsServer]:
    server = SlowDocsServer(request.param)
    yield server
    server.stop()


@pytest.mark.parametrize("slow_docs", [0.3], indirect=True)
def test_close_waits_for_the_requests_a_failed_discovery_left_running(slow_docs: SlowDocsServer) -> None:
    # Discovery sends its three requests at once; the 401 ends the call while the other two are in
    # flight. A pool closed under them could leave a socket open (CI, stop 28): close() lets them end.
    with vt.Client(slow_docs.base_url, api_key="wrong") as client, pytest.raises(vt.AuthenticationError):
        client.embed("hello", model="m")
    assert sorted(slow_docs.answered) == ["/openapi.json", "/version"]


@pytest.mark.parametrize("slow_docs", [5.0], indirect=True)
def test_close_waits_at_most_a_second_for_a_hung_request(slow_docs: SlowDocsServer) -> None:
    client = vt.Client(slow_docs.base_url, api_key="wrong")
    with pytest.raises(vt.AuthenticationError):
        client.embed("hello", model="m")
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 2.0
    assert slow_docs.answered == []
