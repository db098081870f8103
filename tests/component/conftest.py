"""The component tier: the SDK's glue against FakeVLLM over real HTTP (no vLLM server).

Every test here is marked ``component`` (tests/conftest.py marks each tier by its folder). The unit tier's
``no_sleep`` (retry sleeps recorded, not slept) and ``make_client`` (each test on both clients) apply here
too; ``fake_embed``, ``fake_rerank``, ``fake_stt``, ``fake_ocr``, ... are FakeVLLM servers configured like
the real fixture of that name (tests/fakes.py), one per module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vllm_tasks.testing import OCR_TASKS, SPEECH_TASKS, FakeVLLM

from ..fakes import FAKE_SETTINGS, FakeFixture, fake_like
from ..unit.conftest import BASE, make_client, no_sleep

__all__ = ["BASE", "make_client", "no_sleep"]


def _fake_fixture(name: str) -> object:
    @pytest.fixture(scope="module", name="fake_" + name.replace("-", "_"))
    def fixture() -> Iterator[FakeFixture]:
        with fake_like(name) as server:
            yield server

    return fixture


for _name in FAKE_SETTINGS:
    globals()["fake_" + _name.replace("-", "_")] = _fake_fixture(_name)


@pytest.fixture
def ocr_fake() -> Iterator[FakeVLLM]:
    """A fresh OCR FakeVLLM per test (the folder jobs count its requests)."""
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as server:
        yield server


@pytest.fixture
def stt_fake() -> Iterator[FakeVLLM]:
    """A fresh speech-to-text FakeVLLM per test."""
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS) as server:
        yield server
