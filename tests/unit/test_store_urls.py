"""The vector-store URLs of ``embed_file``'s ``out`` (``vllm_tasks.jobs.stores.store_target``): LanceDB and
Qdrant's local mode name a folder and a table, a Qdrant server a host, a port and a collection; what is not
one of them is a file path, and a store URL missing its parts is refused naming ``out``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks.jobs.stores import StoreTarget, store_target


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("lancedb://./db#docs", StoreTarget("lancedb", "lancedb://./db#docs", "docs", folder=Path("db"))),
        (
            "lancedb:///data/v.db#t-1.x",
            StoreTarget("lancedb", "lancedb:///data/v.db#t-1.x", "t-1.x", Path("/data/v.db")),
        ),
        ("qdrant://q#c", StoreTarget("qdrant", "qdrant://q#c", "c", folder=Path("q"))),
        (
            "qdrant+http://localhost#c",
            StoreTarget("qdrant", "qdrant+http://localhost#c", "c", server="http://localhost:6333"),
        ),
        (
            "QDRANT+HTTPS://q.example:443#c",
            StoreTarget("qdrant", "QDRANT+HTTPS://q.example:443#c", "c", server="https://q.example:443"),
        ),
        (
            "qdrant+http://[::1]:7000#c",
            StoreTarget("qdrant", "qdrant+http://[::1]:7000#c", "c", server="http://[::1]:7000"),
        ),
    ],
)
def test_a_store_url_names_its_folder_or_server_and_table(out: str, expected: StoreTarget) -> None:
    assert store_target(out) == expected


def test_the_job_files_of_a_server_collection_go_to_the_current_folder() -> None:
    target = store_target("qdrant+http://gpu1:7000#docs")
    assert target is not None and target.job_path == Path("qdrant-gpu1-7000-docs")
    assert store_target("lancedb://~/db#docs").job_path == Path("~/db").expanduser() / "docs"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "out", ["docs.parquet", "s3://bucket/x.parquet", "lancedb", "db#docs", Path("lancedb://db#t")]
)
def test_anything_else_is_not_a_store(out: object) -> None:
    assert store_target(out) is None


@pytest.mark.parametrize(
    ("out", "says"),
    [
        ("lancedb://./db", "names no LanceDB table"),
        ("lancedb://#docs", "names no LanceDB folder"),
        ("qdrant://a\x00b#docs", "names no Qdrant folder"),
        ("lancedb://./db#a/b", "is not a table name"),
        ("qdrant://./q#", "is not a table name"),
        ("qdrant+http://#c", "is not HOST"),
        ("qdrant+http://h:99999#c", "is not a server URL"),
        ("qdrant+http://h/path#c", "is not HOST"),
        ("qdrant+http://user:pw@h#c", "is not HOST"),
    ],
)
def test_a_store_url_missing_a_part_is_refused_naming_out(out: str, says: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=says) as refused:
        store_target(out)
    assert refused.value.field == "out"


@settings(max_examples=40)
@given(st.text(max_size=40))
def test_any_string_is_a_store_a_path_or_refused_with_the_typed_error(text: str) -> None:
    for out in (text, f"lancedb://{text}", f"qdrant+http://{text}"):
        try:
            target = store_target(out)
        except vt.InvalidInputError:
            continue
        assert target is None or (target.url == out and target.name and (target.folder or target.server))


@pytest.mark.parametrize("out", ["lancedb://./db#docs", "qdrant://./q#docs"])
def test_a_work_dir_is_refused_for_a_vector_store_before_any_request(out: str, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a\nb\n")
    with pytest.raises(vt.InvalidInputError) as refused:
        vt.embed_file("http://127.0.0.1:9", source, out, work_dir=tmp_path / "work")
    assert refused.value.field == "work_dir" and "vector store" in str(refused.value)
