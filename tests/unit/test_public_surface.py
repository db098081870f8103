"""The public surface a user can hold (issue 22, item 6): at most 50 top-level names, each documented;
the names of 0.1 that moved resolve with a DeprecationWarning naming their new place; no exception class
has two bases in the tree."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
import vllm_tasks.errors
import vllm_tasks.jobs
import vllm_tasks.types
from vllm_tasks.calls import CLIENT_DEFAULT, ClientDefault

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
MOVED = vt._MOVED  # the table the module's __getattr__ reads


def documented() -> set[str]:
    """Every ``::: dotted.name`` entry of docs/reference/*.md."""
    text = "\n".join(path.read_text() for path in REFERENCE.glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)", text, flags=re.MULTILINE))


def test_at_most_50_top_level_names() -> None:
    assert len(vt.__all__) <= 50, sorted(vt.__all__)
    assert len(set(vt.__all__)) == len(vt.__all__)


def test_every_top_level_name_resolves() -> None:
    for name in vt.__all__:
        assert getattr(vt, name) is not None


def test_every_top_level_name_is_documented() -> None:
    missing = sorted(
        name for name in vt.__all__ if name != "__version__" and f"vllm_tasks.{name}" not in documented()
    )
    assert not missing, f"docs/reference/*.md has no '::: vllm_tasks.NAME' entry for {missing}"


@pytest.mark.parametrize(
    ("module", "prefix"), [(vllm_tasks.types, "vllm_tasks.types"), (vllm_tasks.jobs, "vllm_tasks.jobs")]
)
def test_every_name_of_types_and_jobs_is_documented(module: Any, prefix: str) -> None:
    names = module.__all__
    missing = sorted(
        name for name in names if f"{prefix}.{name}" not in documented() and name not in vt.__all__
    )
    assert not missing, f"docs/reference/*.md has no '::: {prefix}.NAME' entry for {missing}"


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_every_reference_entry_resolves() -> None:
    for dotted in documented():
        module, _, name = dotted.rpartition(".")
        try:
            value = getattr(__import__(module, fromlist=[name]), name)
        except (ImportError, AttributeError, ValueError):
            value = __import__(dotted, fromlist=["*"])  # a module entry (vllm_tasks.testing)
        assert value is not None, dotted


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_resolves_with_a_deprecation_warning_naming_the_new_path(old: str) -> None:
    module, new, kind = MOVED[old]
    with pytest.warns(DeprecationWarning, match=rf"vllm_tasks\.{old} is deprecated .* 0\.3\.0") as caught:
        value = getattr(vt, old)
    message = str(caught[0].message)
    assert f"{module}" in message and new in message
    if kind:
        assert f"`.kind == {kind!r}`" in message
    target = getattr(__import__(module, fromlist=[new]), new)
    assert value is target
    assert old not in vt.__all__ and old not in dir(vt)


def test_old_name_with_from_import_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match="from vllm_tasks.types import ServerInfo"):
        from vllm_tasks import ServerInfo  # noqa: F401


def test_unknown_name_is_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
            vt.NoSuchThing  # noqa: B018


def exception_classes() -> list[type[BaseException]]:
    found = [
        value
        for value in vars(vllm_tasks.errors).values()
        if inspect.isclass(value) and issubclass(value, vt.VLLMTasksError)
    ]
    assert len(found) <= 31, sorted(cls.__name__ for cls in found)
    return found


@pytest.mark.parametrize("cls", exception_classes(), ids=lambda cls: cls.__name__)
def test_no_exception_has_two_bases_in_the_tree(cls: type[BaseException]) -> None:
    in_tree = [base for base in cls.__bases__ if issubclass(base, vt.VLLMTasksError)]
    assert len(in_tree) <= 1, f"{cls.__name__} derives from {in_tree}"


def test_job_mismatch_names_the_real_way_to_start_over() -> None:
    message = str(vllm_tasks.jobs.JobMismatch("out.npy", ["model: 'a' -> 'b'"]))
    assert "resume=False" in message and "--restart" in message and "restart=True" not in message


def test_client_default_is_a_typed_singleton() -> None:
    assert isinstance(CLIENT_DEFAULT, ClientDefault) and repr(CLIENT_DEFAULT) == "CLIENT_DEFAULT"
    assert list(ClientDefault) == [CLIENT_DEFAULT]
    assert inspect.signature(vt.Client.embed).parameters["timeout"].default is CLIENT_DEFAULT
