"""Sync/async parity: same public methods, same signatures, and the generated twin is up to date."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import vllm_tasks as vt

ROOT = Path(__file__).resolve().parents[2]


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_same_public_methods_with_identical_signatures() -> None:
    sync = public_methods(vt.Client)
    asynchronous = public_methods(vt.AsyncClient)
    assert sorted(sync) == sorted(asynchronous)
    assert "server_info" in sync and "probe" in sync and "wait_until_ready" in sync
    for name, signature in sync.items():
        # Types named AsyncX on the async side are X on the sync side (e.g. the stream a method returns).
        expected = re.sub(r"\bAsync(?=[A-Z])", "", str(asynchronous[name]))
        assert str(signature) == expected, name


#: Methods that do no I/O: plain functions on both clients (``with_options`` returns a new client).
NOT_AWAITED = {"with_options"}


def test_async_methods_are_coroutines_and_sync_are_not() -> None:
    for name in public_methods(vt.AsyncClient):
        assert inspect.iscoroutinefunction(getattr(vt.AsyncClient, name)) != (name in NOT_AWAITED), name
        assert not inspect.iscoroutinefunction(getattr(vt.Client, name)), name


def test_constructor_signatures_match() -> None:
    sync = inspect.signature(vt.Client.__init__)
    asynchronous = inspect.signature(vt.AsyncClient.__init__)
    assert list(sync.parameters) == list(asynchronous.parameters)


def test_generated_sync_package_is_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("unasync", ROOT / "scripts" / "unasync.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.generate()
    actual = {path.name: path.read_text() for path in (ROOT / "vllm_tasks" / "_sync").glob("*.py")}
    assert actual == expected, "run `python scripts/unasync.py` after editing vllm_tasks/_async/"
