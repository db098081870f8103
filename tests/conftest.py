"""Shared pytest configuration: registers the real-vLLM-server plugin from server-fixtures/.

Fixtures it provides (see server-fixtures/pytest_plugin.py), one per entry of fixture_table.FIXTURES:
vllm_embed, vllm_embed_mrl, vllm_embed_matryoshka, vllm_rerank, vllm_api_key, vllm_late_interaction, vllm_ocr,
vllm_ocr_no_processor, vllm_stt -- each a VLLMServer with .name, .base_url, .model, .api_key (None unless
keyed), .vllm_version ($VLLM_TASKS_FIXTURE_VLLM moves them to an older vLLM) -- and matrix_server, a
server of (fixture, vLLM version) by indirect parametrization over fixture_pins.selected_matrix_versions().
Markers: gpu, and one tier marker per folder, applied here: ``unit`` (tests/unit: pure functions and
pytest-httpx), ``component`` (tests/component: FakeVLLM over real HTTP), ``contract`` (tests/contract: real
vLLM servers). ``scripts/test.sh --tier NAME`` runs one tier; ``-m "not contract"`` the two cheap ones.

Every test module ends with a garbage collection that fails the module if its tests left a socket, transport
or file open (``no_connections_left_open``).

From vllm_tasks.testing.pytest_plugin: the ``fake_vllm`` fixture (a FakeVLLM per test) and its marker.
"""

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from .clients import left_open_at_collection

_SERVER_FIXTURES = str(Path(__file__).resolve().parent.parent / "server-fixtures")
if _SERVER_FIXTURES not in sys.path:
    sys.path.insert(0, _SERVER_FIXTURES)

# vllm_tasks.testing.pytest_plugin (the `fake_vllm` fixture) also loads through its pytest11 entry point
# once the package is installed; naming it here keeps it available in a checkout whose installed metadata
# predates the entry point, and is a no-op otherwise (the entry point is named after the module). pytester:
# tests/unit/test_testing_kit.py runs that plugin and docs/testing.md's example in an inner session.
pytest_plugins = ["pytest_plugin", "vllm_tasks.testing.pytest_plugin", "pytester"]

# No per-example time limit for hypothesis: an example's first run pays for imports and warm-up, and the
# tiers share CI's 2 cores, so a correct test can take over the default 200 ms once.
settings.register_profile("shared-cores", deadline=None)
settings.load_profile("shared-cores")


TIERS = ("unit", "component", "contract")
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier: the folder under tests/ it lives in."""
    for item in items:
        try:
            tier = item.path.relative_to(_TESTS).parts[0]
        except ValueError:  # an inner pytester session's own files
            continue
        if tier in TIERS:
            item.add_marker(tier)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_open_by_the_session() -> Iterator[None]:
    """Fails the session (its last test) if its tests left a socket, transport or file open that no
    module's check could see: one alive at the end of a module, dropped later (see below). Collection's
    own leftovers fail before the first test."""
    left_open = left_open_at_collection()
    assert not left_open, "collecting the tests left these open:\n" + "\n".join(left_open)
    yield
    gc.unfreeze()
    left_open = left_open_at_collection()
    assert not left_open, "the session's tests left these open:\n" + "\n".join(left_open)


@pytest.fixture(scope="module", autouse=True)
def no_connections_left_open() -> Iterator[None]:
    """Fails the test module whose tests left a socket, transport or file open.

    Such an object warns (``ResourceWarning``) only when the garbage collector reaches it, which can be
    many tests later: there, inside a test that turns warnings into errors, it failed a test that had
    nothing to do with it (CI, stop 18). Collecting at the end of each module names the module instead.

    What is alive after that collection is then frozen (``gc.freeze``): later collections, the next
    module's check and the interpreter's own, skip it instead of walking the whole session's heap again
    (0.25-0.3 s a collection once the libraries are imported). What a module's tests make is still
    collected at its end; what was alive at a module's end and is dropped later is collected at the end
    of the session (``nothing_left_open_by_the_session``).
    """
    yield
    left_open = left_open_at_collection()
    assert not left_open, "this module's tests left these open:\n" + "\n".join(left_open)
    gc.freeze()
