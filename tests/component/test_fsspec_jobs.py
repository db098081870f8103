"""``embed_file`` over fsspec URLs, against FakeVLLM and fsspec's ``memory://`` filesystem: every input
format read from a URL and every output written to one equals the local job row for row (and a
``file://`` URL is the local path); a remote job stopped mid-way resumes from its work folder sending
only the missing chunks, one stopped during its upload uploads again without sending a row, and a re-run
of a finished one sends and uploads nothing; a URL whose protocol's package is missing is refused before
any request; a URL's credentials never reach an error, a log line, a manifest or the work folder's name.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.registry import known_implementations

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import locations
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM
from vllm_tasks.testing.wire import Reply, error_reply

EMBED = "/v1/embeddings"
TEXTS = [f"text {i} " + "x" * (i % 5) for i in range(21)]
LONG = 13  # this row is over the fake's context: refused, in the errors file
TEXTS[LONG] = " ".join(["word"] * 100)
SECRET = "S3CR3T-value"
FAST = {"retry_replica_after": 0.05, "give_up_after": 0.3}  # a failing server stops the job quickly


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS, width=8, max_model_len=64) as server:
        yield server


@pytest.fixture
def memory() -> Iterator[tuple[Any, str]]:
    """fsspec's in-process memory filesystem and a fresh bucket name on it (removed after)."""
    fs = fsspec.filesystem("memory")
    bucket = f"bucket-{uuid.uuid4().hex[:8]}"
    yield fs, bucket
    if fs.exists(f"/{bucket}"):
        fs.rm(f"/{bucket}", recursive=True)


def write_input(folder: Path, kind: str) -> Path:
    """``TEXTS`` as a text, JSONL, CSV or Parquet file (ids and a kept column where the format has them)."""
    if kind == "txt":
        (folder / "in.txt").write_text("\n".join(TEXTS) + "\n")
    elif kind == "jsonl":
        rows = (json.dumps({"body": text, "doc": f"d{i}"}) for i, text in enumerate(TEXTS))
        (folder / "in.jsonl").write_text("\n".join(rows) + "\n")
    elif kind == "csv":
        (folder / "in.csv").write_text("body,doc\n" + "".join(f"{t},d{i}\n" for i, t in enumerate(TEXTS)))
    else:
        table = pa.table({"body": TEXTS, "doc": [f"d{i}" for i in range(len(TEXTS))]})
        pq.write_table(table, folder / "in.parquet", row_group_size=4)
    return folder / f"in.{kind}"


def columns(kind: str) -> dict[str, Any]:
    return {} if kind == "txt" else {"text_field": "body", "id_field": "doc"}


def read_output(data: bytes, name: str) -> Any:
    import io

    return np.load(io.BytesIO(data)) if name.endswith(".npy") else pq.read_table(io.BytesIO(data))


@pytest.mark.parametrize(
    ("kind", "out_name"),
    [("txt", "out.npy"), ("jsonl", "out.parquet"), ("csv", "out.npy"), ("parquet", "out.parquet")],
)
def test_a_remote_job_equals_the_local_job_row_for_row(
    tmp_path: Path, fake: FakeVLLM, memory: tuple[Any, str], kind: str, out_name: str
) -> None:
    fs, bucket = memory
    source = write_input(tmp_path, kind)
    fs.pipe(f"/{bucket}/{source.name}", source.read_bytes())
    local = vt.embed_file(fake.url, source, tmp_path / out_name, chunk_rows=5, **columns(kind))
    url = f"memory://{bucket}/out/{out_name}"
    remote = vt.embed_file(
        fake.url,
        f"memory://{bucket}/{source.name}",
        url,
        chunk_rows=5,
        work_dir=tmp_path / "work",
        **columns(kind),
    )
    assert remote.url == url and remote.summary().startswith(f"{url}: 21 ")
    assert (remote.texts, remote.failed_rows) == (local.texts, local.failed_rows) == (21, 1)
    uploaded = read_output(fs.cat(f"/{bucket}/out/{out_name}"), out_name)
    expected = read_output((tmp_path / out_name).read_bytes(), out_name)
    if out_name.endswith(".npy"):
        np.testing.assert_array_equal(uploaded, expected)
        assert np.isnan(uploaded[LONG]).all() and not np.isnan(np.delete(uploaded, LONG, 0)).any()
        np.testing.assert_array_equal(uploaded[0], fake.vector(TEXTS[0]))  # two rows, two vectors
        np.testing.assert_array_equal(uploaded[1], fake.vector(TEXTS[1]))
        assert not np.array_equal(uploaded[0], uploaded[1])
    else:
        assert uploaded.equals(expected)
        assert uploaded.column("doc").to_pylist() == [f"d{i}" for i in range(21)]
    errors = [json.loads(line) for line in fs.cat(f"/{bucket}/out/{out_name}.errors.jsonl").splitlines()]
    assert [row["row"] for row in errors] == [LONG]
    if kind == "csv":  # .npy with an id column: the ids file goes along
        ids = fs.cat(f"/{bucket}/out/{out_name}.ids.jsonl").decode().split()
        assert ids == [json.dumps(f"d{i}") for i in range(21)]
    manifest = json.loads(fs.cat(f"/{bucket}/out/{out_name}.manifest.json"))
    local_manifest = json.loads((tmp_path / f"{out_name}.manifest.json").read_text())
    assert (manifest["source"], manifest["output"]) == (f"memory://{bucket}/{source.name}", url)
    assert manifest["fingerprint"]["input"] == local_manifest["fingerprint"]["input"]  # same content digest


def test_a_file_url_is_the_local_path(tmp_path: Path, fake: FakeVLLM) -> None:
    source = write_input(tmp_path, "txt")
    report = vt.embed_file(fake.url, source.as_uri(), (tmp_path / "out.npy").as_uri(), chunk_rows=5)
    assert report.url is None and report.out == tmp_path / "out.npy"
    np.testing.assert_array_equal(np.load(report.out)[0], fake.vector(TEXTS[0]))


def failing_from(fake: FakeVLLM, texts: list[str]) -> Callable[[Reply], Reply]:
    """A mutation answering a 500 instead of any embeddings answer that holds the vector of one of
    ``texts`` (a JSON answer, float or base64, or a ``bytes`` answer's raw float32 body)."""
    vectors = [fake.vector(text).tobytes() for text in texts]

    def vector(embedding: str | list[float]) -> bytes:
        if isinstance(embedding, str):
            return base64.b64decode(embedding)
        return np.asarray(embedding, np.float32).tobytes()

    def mutation(reply: Reply) -> Reply:
        body = reply.body
        if body.startswith(b"{"):
            body = b"".join(vector(row["embedding"]) for row in json.loads(body).get("data") or [])
        if any(wanted in body for wanted in vectors):
            return error_reply(500, "Internal Server Error (a later chunk)")
        return reply

    return mutation


def test_a_stopped_remote_job_resumes_only_what_was_missing(
    tmp_path: Path, fake: FakeVLLM, memory: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, bucket = memory
    source = write_input(tmp_path, "txt")
    fs.pipe(f"/{bucket}/in.txt", source.read_bytes())
    args: dict[str, Any] = {"chunk_rows": 5, "batch_size": 5, "work_dir": tmp_path / "work"}
    url = f"memory://{bucket}/out.npy"
    fake.clear_requests()
    # Every answer holding a row of the third chunk on fails (by content: the window of chunks sends
    # batches and model checks in an order that depends on timing), so the first two chunks are done.
    fake.mutate(failing_from(fake, TEXTS[10:]), path=EMBED, times=None)
    try:
        with vt.Client(fake.url, max_retries=0) as client, pytest.raises(vt.InternalServerError):
            vt.embed_file(client, f"memory://{bucket}/in.txt", url, concurrency=1, **FAST, **args)
    finally:
        fake.clear_faults()
    saved = json.loads((tmp_path / "work" / "out.npy.partial" / "state.json").read_text())
    assert saved["done_below"] == 2 and not fs.exists(f"/{bucket}/out.npy")  # nothing uploaded yet
    fake.clear_requests()

    uploads: list[str] = []
    real_upload = locations.RemoteFile.upload

    def stopped_before_the_manifest(self: locations.RemoteFile, local: Path) -> None:
        uploads.append(self.shown)
        if self.shown.endswith(".manifest.json"):
            raise vt.jobs.JobError("stopped")
        real_upload(self, local)

    monkeypatch.setattr(locations.RemoteFile, "upload", stopped_before_the_manifest)
    with pytest.raises(vt.jobs.JobError, match="stopped"):
        vt.embed_file(fake.url, f"memory://{bucket}/in.txt", url, **args)
    sent = [r.json["input"] for r in fake.received(EMBED) if r.json["input"] != [PROBE_TEXT]]
    assert {t for batch in sent for t in batch} == set(TEXTS[10:])  # only the missing chunks (13's split)
    assert not fs.exists(f"/{bucket}/out.npy.manifest.json")
    monkeypatch.setattr(locations.RemoteFile, "upload", real_upload)
    fake.clear_requests()

    report = vt.embed_file(fake.url, f"memory://{bucket}/in.txt", url, **args)
    assert report.already_complete and report.chunks_sent == 0
    assert [r for r in fake.received(EMBED) if r.json["input"] != [PROBE_TEXT]] == []
    assert fs.exists(f"/{bucket}/out.npy.manifest.json")
    expected = np.stack([fake.vector(t) for t in TEXTS])
    expected[LONG] = np.nan
    np.testing.assert_array_equal(read_output(fs.cat(f"/{bucket}/out.npy"), "out.npy"), expected)

    uploads.clear()
    monkeypatch.setattr(locations.RemoteFile, "upload", stopped_before_the_manifest)
    again = vt.embed_file(fake.url, f"memory://{bucket}/in.txt", url, **args)
    assert again.already_complete and uploads == []  # published already: nothing sent again

    fs.pipe(f"/{bucket}/in.txt", source.read_bytes().replace(b"text 3", b"TEXT 3"))
    with pytest.raises(vt.jobs.JobMismatch, match="input content"):
        vt.embed_file(fake.url, f"memory://{bucket}/in.txt", url, **args)


def test_a_protocol_without_its_package_is_refused_before_any_request(
    tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        known_implementations,
        "vtmissing",
        {"class": "vtmissing_pkg.FileSystem", "err": "Install vtmissing_pkg"},
    )
    fake.clear_requests()
    for source, out in [
        ("vtmissing://b/in.txt", tmp_path / "o.npy"),
        (str(tmp_path / "x"), "vtmissing://b/o"),
    ]:
        with pytest.raises(vt.InvalidInputError, match="needs the vtmissing_pkg package") as caught:
            vt.embed_file(fake.url, source, out)
        assert caught.value.fix == "pip install vtmissing_pkg"
    with pytest.raises(vt.InvalidInputError, match="protocol fsspec does not know"):
        vt.embed_file(fake.url, "nosuchproto://b/in.txt", tmp_path / "o.npy")
    assert fake.received() == []
    assert [locations.protocol_package(p) for p in ("s3", "gs", "hf")] == ["s3fs", "gcsfs", "huggingface_hub"]


def test_the_fsspec_extra_is_named_when_fsspec_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "fsspec", None)
    with pytest.raises(vt.MissingDependency, match=r"vllm-tasks\[fsspec\]"):
        locations.location("s3://bucket/corpus.txt", "source")


def test_credentials_in_a_url_are_never_shown(
    tmp_path: Path,
    fake: FakeVLLM,
    memory: tuple[Any, str],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fs, bucket = memory
    source = write_input(tmp_path, "txt")
    secret_in = f"memory://user:{SECRET}@{bucket}/in.txt?token={SECRET}"
    secret_out = f"memory://user:{SECRET}@{bucket}/out.parquet?sig={SECRET}"
    fs.pipe(fsspec.core.url_to_fs(secret_in)[1], source.read_bytes())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    caplog.set_level(logging.DEBUG)
    shown: list[str] = []

    with pytest.raises(vt.InvalidInputError) as missing:
        vt.embed_file(fake.url, secret_in.replace("in.txt", "gone.txt"), secret_out)
    shown.append(str(missing.value) + repr(missing.value.value))

    real_put = fs.put_file

    def refused(lpath: str, rpath: str, **kwargs: Any) -> None:
        raise PermissionError(f"access denied writing {rpath} (from {secret_out})")

    monkeypatch.setattr(fs, "put_file", refused)
    with pytest.raises(vt.jobs.JobError) as denied:
        vt.embed_file(fake.url, secret_in, secret_out, chunk_rows=5)
    shown.append(str(denied.value))
    monkeypatch.setattr(fs, "put_file", real_put)

    assert cli.main(["embed-file", secret_in, "--out", secret_out, "--url", fake.url]) == cli.EXIT_OK
    report = vt.embed_file(fake.url, secret_in, secret_out, chunk_rows=5)
    assert report.already_complete
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("fsspec")]  # fsspec's are its own
    shown += [report.summary(), repr(report), *capsys.readouterr(), *ours]
    manifest = fs.cat(fsspec.core.url_to_fs(secret_out.replace("?", ".manifest.json?"))[1]).decode()
    shown += [manifest, *(str(p) for p in (tmp_path / "cache").rglob("*"))]
    shown += [p.read_text() for p in (tmp_path / "cache").rglob("*.json")]
    assert "access denied" in shown[1] and "gone.txt" in shown[0] and "memory://" in manifest
    for text in shown:
        assert SECRET not in text


def test_image_rows_need_a_local_input(tmp_path: Path, fake: FakeVLLM, memory: tuple[Any, str]) -> None:
    fs, bucket = memory
    fs.pipe(f"/{bucket}/photos.txt", b"a.png\n")
    fake.clear_requests()
    with pytest.raises(vt.InvalidInputError, match="reads its images next to a local input"):
        vt.embed_file(fake.url, f"memory://{bucket}/photos.txt", tmp_path / "o.npy", images=True)
    assert fake.received() == []


def test_the_cli_takes_urls_and_a_work_dir(tmp_path: Path, fake: FakeVLLM, memory: tuple[Any, str]) -> None:
    fs, bucket = memory
    fs.pipe(f"/{bucket}/in.txt", b"a\nb\n")
    argv = ["embed-file", f"memory://{bucket}/in.txt", "--out", f"memory://{bucket}/o.npy", "--url", fake.url]
    assert cli.main([*argv, "--work-dir", str(tmp_path / "w")]) == cli.EXIT_OK
    assert (tmp_path / "w" / "o.npy").is_file()  # the finished output's copy, beside its state
    np.testing.assert_array_equal(read_output(fs.cat(f"/{bucket}/o.npy"), "o.npy")[1], fake.vector("b"))
