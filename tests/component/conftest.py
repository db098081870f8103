"""The component tier: the SDK's glue against FakeVLLM over real HTTP (no vLLM server).

Every test here is marked ``component`` (tests/conftest.py marks each tier by its folder). The unit tier's
``no_sleep`` (retry sleeps recorded, not slept) and ``make_client`` (each test on both clients) apply here
too; ``fake_embed``, ``fake_rerank``, ``fake_stt``, ``fake_ocr``, ... are FakeVLLM servers configured like
the real fixture of that name (tests/fakes.py), one per module.
"""

from __future__ import annotations

import subprocess
import time
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


RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "default_worker.py", "dashboard", "log_monitor.py")


def ray_processes() -> list[str]:
    """Ray's live processes on this machine (by command line): what a runtime leaves when it is not shut
    down. Zombies (state Z: exited, not yet reaped by the init process they were handed to) do not count."""
    listing = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True)
    rows = [line.split(None, 2) for line in listing.stdout.splitlines()[1:]]
    return [
        " ".join(row)
        for row in rows
        if len(row) == 3 and not row[1].startswith("Z") and any(name in row[2] for name in RAY_PROCESSES)
    ]


def wait_for_ray_processes_to_exit(before: list[str], seconds: float = 15.0) -> list[str]:
    """The Ray processes not there ``before``, once they are gone or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in ray_processes() if p not in before]) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    """A local Ray runtime, once for the session (tests/component/test_ray*.py share it: it takes 7-11 s
    to start): 2 CPUs, a 128 MiB object store, no dashboard, no usage stats; shut down after, with no
    process left."""
    import ray
    import ray.data

    before = ray_processes()
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=128 * 1024**2,
            log_to_driver=False,
            configure_logging=False,
        )
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True  # rows come back in dataset order
        context.enable_progress_bars = False
        print(f"Ray runtime started in {time.perf_counter() - started:.1f} s")  # shown with -rA
        try:
            yield
        finally:
            stopping = time.perf_counter()
            ray.shutdown()
            left = wait_for_ray_processes_to_exit(before)
            print(f"Ray runtime stopped in {time.perf_counter() - stopping:.1f} s")
    assert left == []
