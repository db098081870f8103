"""The pytest plugin of vllm_tasks: the ``fake_vllm`` fixture (a started :class:`FakeVLLM` per test).

Registered through the ``pytest11`` entry point, so installing ``vllm-tasks`` makes the fixture
available; ``-p no:vllm_tasks.testing.pytest_plugin`` turns it off. The ``fake_vllm`` marker passes
settings to the server::

    @pytest.mark.fake_vllm(model="bge-m3", tasks=EMBEDDING_TASKS, width=1024)
    def test_search(fake_vllm):
        ...

While the fixture runs, ``VLLM_TASKS_BASE_URL`` points at the fake server, so code that builds
``vllm_tasks.Client()`` without a URL talks to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..defaults import BASE_URL_ENV
from .server import FakeVLLM

MARKER = "fake_vllm"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``fake_vllm`` marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers", f"{MARKER}(**settings): settings of the fake_vllm fixture's FakeVLLM (model, tasks, ...)"
    )


@pytest.fixture
def fake_vllm(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeVLLM]:
    """A started :class:`~vllm_tasks.testing.FakeVLLM`, stopped after the test.

    Settings come from the test's ``@pytest.mark.fake_vllm(...)`` marker (the closest one wins);
    ``VLLM_TASKS_BASE_URL`` is set to its URL for the test.

    Examples:
        >>> def test_embed(fake_vllm):
        ...     with vllm_tasks.Client(fake_vllm.url) as client:
        ...         assert client.embed("hi").vector.shape == (384,)
    """
    marker = request.node.get_closest_marker(MARKER)
    settings = dict(marker.kwargs) if marker is not None else {}
    with FakeVLLM(**settings) as fake:
        monkeypatch.setenv(BASE_URL_ENV, fake.url)
        yield fake
