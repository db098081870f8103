"""The jobs run on one engine: in vllm_tasks/jobs/, only engine.py schedules work, sends requests and
commits finished work.

Every job kind (``embed_file``, ``ocr_dir``, ``transcribe_dir``) is a ``JobKind`` run by
vllm_tasks/jobs/engine.py's ``Engine``: its window of work in flight, its requests over the replicas
(least in flight, hedged, failing ones set aside), its row isolation, and the call of its ``commit``
(sink and checkpoint) as each group finishes; the pool itself (replicas.py) is the only other module that
touches tasks or slots. A second engine -- a module with its own task group, semaphore or
``asyncio.wait`` loop, its own ``pool.acquire``/``pool.race`` calls, its own ``isolate_rows``, or calling
a commit itself -- fails here.

The dataframe fronts (vllm_tasks/integrations/ray.py, daft.py, spark.py) are fronts over that engine too:
each batch is one group worked by ``Engine.answer``; none of them schedules requests (a task group, a
thread map, an executor), isolates refused rows, or takes a replica's slot on its own.

The jobs keep their state in one checkpoint store, take one lock and check one fingerprint: state.py's
``Progress`` (the work folder's ``state.json`` and ``records/``), ``job_lock`` (the only ``flock`` held)
and ``check_same_job`` (the only comparison of fingerprints, ``changes``). A second store (a module that
names those files), a second lock, or a second fingerprint check fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

JOBS = Path(__file__).resolve().parents[2] / "vllm_tasks" / "jobs"
ENGINE = "engine.py"
SCHEDULING = {"create_task", "TaskGroup", "Semaphore", "wait", "as_completed"}
"""asyncio's ways of running requests side by side (``gather`` of a fixed set, ``to_thread`` of a file
read, are not scheduling)."""
SENDING = {"acquire", "try_acquire", "race", "isolate_rows", "commit"}
"""A replica's slot, a hedged request, row isolation, a finished group's commit: what the engine does."""
ALLOWED = {ENGINE: SCHEDULING | SENDING, "replicas.py": SCHEDULING | SENDING, "files.py": {"wait"}}
"""The engine; the pool itself (its slots, a hedged request's copies); ``write_in_thread``, which waits for
its one write thread."""


def called(path: Path) -> set[str]:
    """The names of everything ``path`` calls or names as an attribute (``asyncio.TaskGroup()``,
    ``pool.race(...)``, ``isolate_rows(...)``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
    return names


def test_only_the_engine_schedules_work_and_sends_requests() -> None:
    offenders = {
        path.name: sorted(called(path) & (SCHEDULING | SENDING) - ALLOWED.get(path.name, set()))
        for path in sorted(JOBS.glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_folder_jobs_run_on_the_engine() -> None:
    # (a folder run that sent nothing would pass the test above too); embed_file's EmbedRun is in engine.py
    assert "Engine" in names_used(JOBS / "folders.py")
    assert "EmbedRun" in names_used(JOBS / "embed.py")


INTEGRATIONS = JOBS.parent / "integrations"
DATAFRAME_FRONTS = ("ray.py", "daft.py", "spark.py")
OWN_ROWS = {"isolate_failures", "map_bounded", "ThreadPoolExecutor", "to_thread", "overload_listener"}
"""A front's own engine besides the job engine's words: its own row isolation, a bounded thread map of
rows, an executor, the overload signal an own adaptive limit listens to."""


def test_the_dataframe_fronts_work_their_batches_on_the_engine() -> None:
    offenders = {
        name: sorted(called(INTEGRATIONS / name) & (SCHEDULING | SENDING | OWN_ROWS))
        for name in DATAFRAME_FRONTS
    }
    assert {name: found for name, found in offenders.items() if found} == {}
    assert {"Engine", "ReplicaPool"} <= names_used(INTEGRATIONS / "ray.py")
    for name in ("daft.py", "spark.py"):  # their own rows go through ray.py's engine front
        assert "_send" in called(INTEGRATIONS / name)


def names_used(path: Path) -> set[str]:
    """Every bare name ``path`` uses (a function passed or called)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


STATE = "state.py"
CHECKPOINT_FILES = {"state.json", "records"}
"""The checkpoint store's files, named by the store alone."""
LOCKING = {"flock", "lockf"}
FINGERPRINT_CHECK = {"changes"}
OTHER_PROGRAMS_LOCKS = {"stores.py": {"flock"}}
"""stores.py tests (and lets go at once) the lock a local Qdrant client holds on its folder."""


def strings(path: Path) -> set[str]:
    """Every string constant of ``path`` (docstrings are sentences, not file names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_one_checkpoint_store_one_lock_one_fingerprint_check() -> None:
    offenders = {
        path.name: sorted(
            (strings(path) & CHECKPOINT_FILES)
            | (called(path) & (LOCKING | FINGERPRINT_CHECK)) - OTHER_PROGRAMS_LOCKS.get(path.name, set())
        )
        for path in sorted(JOBS.glob("*.py"))
        if path.name != STATE
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_every_job_kind_keeps_its_state_in_the_store() -> None:
    # (a kind that saved nothing would pass the test above too)
    assert "Progress" in names_used(JOBS / "folders.py") and "Progress" in names_used(JOBS / "embed.py")
    assert "job_lock" in names_used(JOBS / "folders.py") and "job_lock" in names_used(JOBS / "embed.py")
