"""Where a job's input lives (vllm_tasks/jobs/locations.py, inputs.py): a local path or ``file://`` URL
and the same bytes behind a ``memory://`` URL scan to the same rows and the same SHA-256 of the bytes; a
text, JSONL or CSV input is read once for both (a remote one opened once), and the end-of-run digest
reads nothing more while the file stays the same version, the new bytes once it changed."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_tasks.errors import InvalidInputError
from vllm_tasks.jobs import locations
from vllm_tasks.jobs.inputs import InputSpec, file_digest, read_chunks, scan

FS = fsspec.filesystem("memory")


@pytest.fixture
def bucket() -> Iterator[str]:
    name = f"scan-{uuid.uuid4().hex[:8]}"
    yield name
    if FS.exists(f"/{name}"):
        FS.rm(f"/{name}", recursive=True)


def remote(name: str, data: bytes) -> str:
    FS.pipe(f"/{name}", data)
    return f"memory://{name}"


FILES = {
    "in.txt": b"\xef\xbb\xbfone\r\ntwo\n\nthree",  # a BOM, CRLF, an empty row, no last newline
    "in.jsonl": b'{"text": "a"}\n\n{"text": "b", "id": 7}\n',
    "in.csv": b'text,id\n"x, y",1\n\nz,2\n\n\n',  # blank lines are not rows, but are bytes
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_url_scans_as_the_local_file(tmp_path: Path, bucket: str, name: str) -> None:
    data = FILES[name]
    (tmp_path / name).write_bytes(data)
    local = scan(InputSpec.create(tmp_path / name))
    assert local[1] == hashlib.sha256(data).hexdigest()
    for source in (remote(f"{bucket}/{name}", data), (tmp_path / name).as_uri()):
        spec = InputSpec.create(source)
        assert scan(spec) == local
        assert [c.texts for c in read_chunks(spec, 2)] == [
            c.texts for c in read_chunks(InputSpec.create(tmp_path / name), 2)
        ]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30), max_size=20))
def test_the_digest_read_with_the_rows_is_the_files_sha256(lines: list[str]) -> None:
    data = "\n".join(lines).encode()
    url = remote(f"hyp-{uuid.uuid4().hex}.txt", data)
    try:
        rows, digest = scan(InputSpec.create(url))
    finally:
        FS.rm_file(url.removeprefix("memory://"))
    assert digest == hashlib.sha256(data).hexdigest()
    assert rows == data.count(b"\n") + (not data.endswith(b"\n")) if data else rows == 0


def test_a_remote_text_input_is_read_once_and_its_change_is_seen(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real_open = locations.RemoteFile.open

    def counted(self: locations.RemoteFile, mode: Any = "rb") -> Any:
        opened.append(self.shown)
        return real_open(self, mode)

    monkeypatch.setattr(locations.RemoteFile, "open", counted)
    spec = InputSpec.create(remote(f"{bucket}/in.txt", b"a\nb\n"))
    rows, digest = scan(spec)
    assert file_digest(spec.path) == digest and rows == 2
    assert len(opened) == 1  # the rows and the digest from one read; the check at the end reads nothing
    FS.pipe(f"/{bucket}/in.txt", b"a\nc\n")
    assert file_digest(spec.path) == hashlib.sha256(b"a\nc\n").hexdigest() and len(opened) == 2


def test_a_missing_or_folder_url_is_refused(bucket: str) -> None:
    FS.pipe(f"/{bucket}/dir/x.txt", b"x")
    with pytest.raises(InvalidInputError, match="does not exist"):
        scan(InputSpec.create(f"memory://{bucket}/nope.txt"))
    with pytest.raises(InvalidInputError, match="is not a file"):
        scan(InputSpec.create(f"memory://{bucket}/dir"))
    with pytest.raises(InvalidInputError, match="another host"):
        InputSpec.create("file://elsewhere/x.txt")
