"""The recordings are current: every exchange recorded from a real fixture (tests/recorded/<fixture>/) is
sent again to that fixture's real server and must be answered the same way as a client reads it (the
comparison of tests/replay.py, which tests/component/test_fake_replay.py holds FakeVLLM to). So the chain
real vLLM = recordings = FakeVLLM is checked at both ends in every run; a failure here means vLLM changed
and the fixture must be recorded again (server-fixtures/record.py), after which the replay runs on the new
recordings. Also: malformed HTTP gets uvicorn's 400, which FakeVLLM imitates.

One test per fixture, so that the server plugin starts each server once, with its other tests. The
`ocr-no-processor` fixture's one exchange is left out: its server would start for it alone (a minute), and
it is the n-gram check that tests/contract/test_ocr.py makes on the `ocr` server's side.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from pytest_plugin import FIXTURE_NAMES

from tests.replay import (
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

pytestmark = pytest.mark.contract

LEFT_OUT = frozenset({"ocr-no-processor"})
PYTEST_FIXTURE = {name: fixture for fixture, name in FIXTURE_NAMES.items()}  # "embed" -> "vllm_embed"
FIXTURES = sorted({path.parent.name for path in RECORDINGS} - LEFT_OUT)


def fixture_test(fixture: str) -> Callable[..., None]:
    """The test of one fixture's recordings, using its server fixture (so the plugin sees it)."""

    @pytest.mark.usefixtures(PYTEST_FIXTURE[fixture])
    @pytest.mark.parametrize(
        "recorded", [p for p in RECORDINGS if p.parent.name == fixture], ids=lambda p: p.stem
    )
    def test(recorded: Path, request: pytest.FixtureRequest) -> None:
        server = request.getfixturevalue(PYTEST_FIXTURE[fixture])
        recording = json.loads(recorded.read_text())
        exchange = f"{fixture}/{recorded.stem}"
        with httpx.Client(base_url=server.base_url, timeout=600) as client:
            response = client.send(replayed_request(client, recording, exchange))
        live = answer_of(response)
        method, path = recording["request"]["method"], recording["request"]["path"]
        found = divergences(recorded_answer(recording), live, fixture, method, path)
        if recording["vllm_version"] != server.vllm_version:
            found.append(
                f"version: recorded from vLLM {recording['vllm_version']}, served {server.vllm_version}"
            )
        if found:
            pytest.fail(
                f"{exchange}: the real server no longer answers as recorded ('real' is the recording, "
                f"'fake' the live server); record again (server-fixtures/record.py):\n{report(found)}",
                pytrace=False,
            )

    test.__doc__ = f"The {fixture} fixture still answers its recorded exchanges as recorded."
    return test


for _fixture in FIXTURES:
    globals()[f"test_{_fixture.replace('-', '_')}_answers_as_recorded"] = fixture_test(_fixture)


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_http_gets_uvicorns_400(case: str, vllm_embed: object) -> None:
    assert_uvicorns_400(vllm_embed.base_url, MALFORMED[case]())  # type: ignore[attr-defined]


def test_a_request_line_without_a_version_is_refused_by_vllm(vllm_embed: object) -> None:
    assert_versionless_request_is_refused_by_vllm(vllm_embed.base_url)  # type: ignore[attr-defined]
