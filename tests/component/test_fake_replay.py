"""FakeVLLM held to the real server: every exchange recorded from a real vLLM CPU fixture is replayed.

tests/recorded/<fixture>/<name>.json hold requests sent to the real fixtures and what they answered
(server-fixtures/record.py, record_stt.py). Each one is a test here: the recorded request is rebuilt as
the recorders sent it and sent with plain httpx to FakeVLLM configured like that fixture
(tests/fakes.py, one fake per fixture), and the two answers must agree on what a client reads:

- the status code and the vLLM version the recordings come from;
- the headers in :data:`READ_HEADERS`;
- an error body: its keys and value types, ``error.type``, ``error.code``, ``error.param`` (or FastAPI's
  ``detail``, or ``{"error": "Unauthorized"}``), how the SDK reads it (``errors.error_from_response``: the
  exception class, ``param``, the context length and token count it parses out of the message) and the
  phrases other SDK code looks for (:data:`SDK_PHRASES`);
- a JSON body: the same keys recursively, the same value types, the same list lengths (except the
  model-dependent ones of :data:`FREE_LENGTHS`); values may differ (no model runs in the fake);
- a server-sent-event stream: the same kinds of events in the same order (a run of like events, one per
  transcribed word, counts as one kind), each shaped like the real one;
- a binary body: the same length (rows x width x dtype size); ``/openapi.json``: the same routes among
  those FakeVLLM serves, with the same methods (:data:`ROUTES_NOT_IMITATED` lists the others).

A divergence FakeVLLM cannot sensibly imitate is listed in :data:`KNOWN_GAPS` with its reason; the test
then checks it is still exactly that gap. New or re-recorded exchanges are picked up as they appear. Also
here: malformed HTTP gets uvicorn's 400, as from the real server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from ..fakes import FakeFixture, fake_like
from ..replay import (
    KNOWN_GAPS,
    MALFORMED,
    RECORDINGS,
    answer_of,
    assert_uvicorns_400,
    assert_versionless_request_is_refused_by_vllm,
    divergences,
    recorded_answer,
    replayed_request,
    report,
)

# --------------------------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def fake_of() -> Iterator[Callable[[str], FakeFixture]]:
    """The fake of a fixture, started on first use and kept for the module."""
    with ExitStack() as stack:
        started: dict[str, FakeFixture] = {}

        def get(name: str) -> FakeFixture:
            if name not in started:
                started[name] = stack.enter_context(fake_like(name))
            return started[name]

        yield get


@pytest.mark.parametrize("recorded", RECORDINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fake_answers_like_the_real_server(recorded: Path, fake_of: Callable[[str], FakeFixture]) -> None:
    recording = json.loads(recorded.read_text())
    fixture, exchange = recorded.parent.name, f"{recorded.parent.name}/{recorded.stem}"
    server = fake_of(fixture)
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        response = client.send(replayed_request(client, recording, exchange))
    fake = answer_of(response)
    method, path = recording["request"]["method"], recording["request"]["path"]
    found = divergences(recorded_answer(recording), fake, fixture, method, path)
    if recording["vllm_version"] != server.fake.settings.version:
        found.append(
            f"version: recorded from vLLM {recording['vllm_version']}, fake is {server.fake.settings.version}"
        )
    gap = KNOWN_GAPS.get(exchange)
    if gap is not None and found != list(gap.divergences):
        pytest.fail(f"{exchange}: the known gap ({gap.reason}) changed; now:\n{report(found)}", pytrace=False)
    if gap is None and found:
        pytest.fail(f"{exchange}: FakeVLLM differs from the real server:\n{report(found)}", pytrace=False)


def test_every_known_gap_names_a_recording() -> None:
    names = {f"{p.parent.name}/{p.stem}" for p in RECORDINGS}
    assert set(KNOWN_GAPS) <= names


# ------------------------------------------------------------------------------------ malformed HTTP


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_http_gets_uvicorns_400(case: str, fake_of: Callable[[str], FakeFixture]) -> None:
    """vLLM's server (uvicorn, httptools) answers whatever its parser refuses with 400 "Invalid HTTP request
    received." in plain text and closes the connection (uvicorn's ``send_400_response``)."""
    server = fake_of("embed")
    assert_uvicorns_400(server.base_url, MALFORMED[case]())


def test_a_request_line_without_a_version_is_refused_by_vllm(fake_of: Callable[[str], FakeFixture]) -> None:
    """uvicorn's parser takes ``POST /path`` with no version; vLLM then refuses the body (no content type)."""
    assert_versionless_request_is_refused_by_vllm(fake_of("embed").base_url)
