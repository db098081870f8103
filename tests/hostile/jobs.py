"""The jobs (``embed_file``, ``ocr_dir``, ``transcribe_dir`` and their async twins) and the CLI's commands in
the registry: attacked with hostile answers (a refused row is then a right outcome) and hostile inputs
(sources that are not regular files, vanishing inputs, missing, read-only, full and symlinked outputs)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.testing import Reply

from .inputs import HOSTILE_PATHS, refused
from .registry import ASYNC_CASES, TEXTS, Call, Env, png, register, wav

JOB_CASES = ("transient", "nan", "width", "batch-wider", "row-missing", "truncated", "html-200",
             "retry-after-garbage")  # fmt: skip
FOLDER_CASES = ("transient", "truncated", "html-200", "retry-after-garbage")
STATE = frozenset({"manifest.json", ".vllm-tasks"})
"""Job bookkeeping (clocks, counts): not part of the output compared with a clean run's."""


@dataclass(frozen=True)
class JobOutput:
    """What a job wrote (the files' contents, ``.npy`` as arrays) and how many rows or documents it
    refused."""

    files: dict[str, Any]
    failed: int


def written(folder: Path) -> dict[str, Any]:
    files: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        bookkeeping = relative.name.endswith((".lock", ".errors.jsonl", ".manifest.json"))
        if relative.parts[0] in STATE or bookkeeping or path.is_dir():
            continue
        if path.suffix == ".npy":
            files[str(relative)] = np.load(path)
        elif path.name == "pages.jsonl":
            files[str(relative)] = sorted(path.read_text().splitlines())
        else:
            files[str(relative)] = path.read_bytes()
    return files


def refused_rows(clean: JobOutput) -> Callable[[Any], bool]:
    """A job's answer to a broken answer: rows or documents refused (counted), every other one right."""

    def check(value: Any) -> bool:
        if not isinstance(value, JobOutput) or value.failed <= 0:
            return False
        for name, content in value.files.items():
            expected = clean.files.get(name)
            if isinstance(content, np.ndarray):
                if expected is None or content.shape != expected.shape:
                    return False
                nan_rows = np.isnan(content).all(axis=1)
                if nan_rows.sum() != value.failed or not np.array_equal(
                    content[~nan_rows], expected[~nan_rows]
                ):
                    return False
            elif isinstance(content, list):
                if not set(content) <= set(expected or ()):
                    return False
            elif content != expected:
                return False
        return True

    return check


def text_source(env: Env) -> Path:
    source = env.tmp / "in.txt"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("\n".join(TEXTS * 2) + "\n")
    return source


def image_folder(env: Env) -> Path:
    folder = env.tmp / "pages"
    folder.mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (folder / name).write_bytes(png())
    return folder


def audio_folder(env: Env) -> Path:
    folder = env.tmp / "audio"
    folder.mkdir(parents=True)
    (folder / "a.wav").write_bytes(wav())
    return folder


def job_twins(
    name: str,
    source: Callable[[Env], Path],
    server: str,
    cases: tuple[str, ...],
    out: str = "out",
    **options: Any,
) -> None:
    """Register job ``name`` and its async twin ``a<name>`` on ``source``, writing ``out`` under the
    call's folder."""

    def finish(env: Env, report: Any) -> JobOutput:
        failed = getattr(report, "failed_rows", None)
        folder = env.tmp / "out" if out == "out" else env.tmp
        return JobOutput(written(folder), int(failed if failed is not None else len(report.failed)))

    def sync(env: Env) -> JobOutput:
        with env.client() as client:
            report = getattr(vt, name)(client, source(env), env.tmp / out, **options)
        return finish(env, report)

    def run_async(env: Env) -> JobOutput:
        async def go() -> Any:
            async with env.aclient() as client:
                return await getattr(vt, f"a{name}")(client, source(env), env.tmp / out, **options)

        return finish(env, asyncio.run(go()))

    errors = (vt.VLLMTasksError,)
    register(name, Call(sync, server, cases, accepts=refused_rows, errors=errors))
    twin = tuple(case for case in cases if case in ASYNC_CASES)
    register(f"a{name}", Call(run_async, server, twin, accepts=refused_rows, errors=errors))


# A job retries what a server fails to answer, on every replica, until `give_up_after`: short here, as every
# answer of a case is broken.
GIVE_UP = {"give_up_after": 2.0, "retry_replica_after": 0.2}
job_twins("embed_file", text_source, "all", JOB_CASES, out="out.npy", batch_size=2, **GIVE_UP)
job_twins("ocr_dir", image_folder, "ocr", FOLDER_CASES, **GIVE_UP)


def _parquet_job(out: str, **options: Any) -> Callable[[Env], JobOutput]:
    """``embed_file`` on :func:`text_source` into ``out`` under the call's folder, with ``options``."""

    def run(env: Env) -> JobOutput:
        with env.client() as client:
            source = text_source(env)
            report = vt.embed_file(client, source, env.tmp / out, batch_size=2, **options, **GIVE_UP)
        return JobOutput(written(env.tmp), report.failed_rows)

    return run


def image_rows(env: Env) -> Path:
    """A listing of four image rows, each a distinct PNG file beside it."""
    env.tmp.mkdir(parents=True, exist_ok=True)
    names = []
    for index in range(4):
        name = f"{index}.png"
        (env.tmp / name).write_bytes(png(200 + index))
        names.append(name)
    listing = env.tmp / "images.txt"
    listing.write_text("\n".join(names) + "\n")
    return listing


def _image_job(env: Env) -> JobOutput:
    with env.client() as client:
        report = vt.embed_file(client, image_rows(env), env.tmp / "o.npy", images=True, **GIVE_UP)
    return JobOutput(written(env.tmp), report.failed_rows)


MULTI_VECTOR_CASES = ("width", "batch-wider", "nan", "row-missing", "transient")
# Per-token rows in Parquet: a batch of another width must not be cut into rows of the model's.
register(
    "embed_file",
    Call(_parquet_job("mv.parquet", multi_vector=True), "late", MULTI_VECTOR_CASES, label="multi-vector",
         accepts=refused_rows),
    Call(_parquet_job("sparse.parquet", sparse=True), "sparse", (*MULTI_VECTOR_CASES, "truncated"),
         label="sparse", accepts=refused_rows),
    # one image a request: each answer holds one row, so no row can go missing or differ from another's width
    Call(_image_job, "all", ("batch-wider", "nan", "truncated", "transient"), label="images",
         accepts=refused_rows),
)  # fmt: skip
job_twins("transcribe_dir", audio_folder, "all", FOLDER_CASES, **GIVE_UP)

# --------------------------------------------------------------------------------- hostile job inputs


@contextlib.contextmanager
def full_disk() -> Iterator[None]:
    """Writes that reach the disk fail with ENOSPC (``os.fsync``, ``os.replace`` and ``os.write``)."""

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with mock.patch("os.fsync", full), mock.patch("os.replace", full), mock.patch("os.write", full):
        yield


def victim(env: Env) -> Path:
    """A file outside the job that a symlinked output must not overwrite."""
    path = env.tmp / "victim.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("precious\n")
    return path


def embed_input(
    label: str, run: Callable[[vt.Client, Env], Any], check: Callable[[Any], bool] = refused
) -> None:
    def call(env: Env) -> Any:
        env.tmp.mkdir(parents=True, exist_ok=True)
        with env.client() as client:
            return run(client, env)

    register("embed_file", Call(call, "all", label=label, check=check))


def _embed(client: vt.Client, source: Any, out: Any, **options: Any) -> Any:
    return vt.embed_file(client, source, out, **options)


for _name, _make in HOSTILE_PATHS.items():
    if _name != "huge-sparse-file":  # a 4 GiB text source is a long job, not a hostile one
        embed_input(f"source-{_name}", lambda c, env, make=_make: _embed(c, make(env.tmp), env.tmp / "o.npy"))

    def _images(c: vt.Client, env: Env, make: Callable[[Path], Any] = _make) -> Any:
        listing = env.tmp / "images.txt"
        listing.write_bytes(
            os.fsencode(str(make(env.tmp))) + b"\n" + os.fsencode(str(env.tmp / "ok.png")) + b"\n"
        )
        (env.tmp / "ok.png").write_bytes(png())
        return _embed(c, listing, env.tmp / "o.npy", images=True)

    embed_input(f"image-row-{_name}", _images, lambda report: report.failed_rows >= 1)


def _symlinked(suffix: str) -> Callable[[vt.Client, Env], Any]:
    """The job's output (or its lock, or its manifest) is a symlink to a file outside the job: the job may
    refuse (typed) or write its own file, never write through the link."""

    def run(c: vt.Client, env: Env) -> Any:
        out = env.tmp / "o.npy"
        target = victim(env)
        Path(f"{out}{suffix}").symlink_to(target)
        try:
            _embed(c, text_source(env), out)
        except vt.VLLMTasksError:
            if target.read_text() == "precious\n":
                raise
        return "intact" if target.read_text() == "precious\n" else "written through the symlink"

    return run


for _suffix in ("", ".lock", ".manifest.json"):
    embed_input(f"symlinked-{_suffix or 'out'}", _symlinked(_suffix), lambda value: value == "intact")


def _missing_folder(c: vt.Client, env: Env) -> Any:
    report = _embed(c, text_source(env), env.tmp / "new" / "o.npy")
    return report


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Creating or writing a file under ``folder`` fails with EACCES (as for a user without write
    permission: the tests may run as root, whom ``chmod`` does not stop)."""
    real_open, real_os_open = open, os.open
    prefix = str(folder)

    def refuse(path: Any) -> None:
        if str(os.fspath(path)).startswith(prefix) if isinstance(path, str | Path) else False:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(flag in mode for flag in "wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    with mock.patch("builtins.open", guarded_open), mock.patch("os.open", guarded_os_open):
        yield


def _read_only(c: vt.Client, env: Env) -> Any:
    folder = env.tmp / "ro"
    folder.mkdir()
    source = text_source(env)
    with read_only(folder):
        return _embed(c, source, folder / "o.npy")


def _full(c: vt.Client, env: Env) -> Any:
    source = text_source(env)
    with full_disk():
        return _embed(c, source, env.tmp / "o.npy")


def _vanishing(c: vt.Client, env: Env) -> Any:
    assert env.fake is not None
    source = text_source(env)

    def rewrite(reply: Reply) -> Reply:
        source.write_text("another text\n" * 6)
        return reply

    env.fake.mutate(rewrite, path="/v1/embeddings")
    try:
        return _embed(c, source, env.tmp / "o.npy", batch_size=2, concurrency=1)
    finally:
        env.fake.clear_faults()


HOSTILE_URLS: dict[str, Callable[[Env], tuple[Any, Any]]] = {
    "source-url-unknown-protocol": lambda env: ("nosuchproto://b/in.txt", env.tmp / "o.npy"),
    "source-url-protocol-package-missing": lambda env: ("vtmissing://b/in.txt", env.tmp / "o.npy"),
    "source-url-missing-file": lambda env: (
        "memory://user:KEY@vt-hostile/none.txt?sig=KEY",
        env.tmp / "o.npy",
    ),
    "source-url-folder": lambda env: ("memory://vt-hostile", env.tmp / "o.npy"),
    "source-file-url-other-host": lambda env: ("file://elsewhere/in.txt", env.tmp / "o.npy"),
    "out-url-without-a-name": lambda env: (text_source(env), "memory://vt-hostile/"),
    "out-url-protocol-package-missing": lambda env: (text_source(env), "vtmissing://b/o.npy"),
    "out-url-is-the-source": lambda env: ("memory://vt-hostile/in.txt", "memory://vt-hostile/in.txt"),
}
"""fsspec URLs a job refuses (typed) before any request; ``vtmissing://`` is a protocol whose package is
not installed (registered with fsspec while the call runs)."""


def _url_job(make: Callable[[Env], tuple[Any, Any]]) -> Callable[[vt.Client, Env], Any]:
    def run(c: vt.Client, env: Env) -> Any:
        import fsspec
        from fsspec.registry import known_implementations

        fsspec.filesystem("memory").pipe("/vt-hostile/in.txt", b"a\n")
        missing = {"class": "vtmissing_pkg.FileSystem", "err": "Install vtmissing_pkg"}
        with mock.patch.dict(known_implementations, {"vtmissing": missing}):
            return _embed(c, *make(env))

    return run


for _name, _urls in HOSTILE_URLS.items():
    embed_input(_name, _url_job(_urls))
embed_input("out-folder-missing", _missing_folder, lambda report: Path(report.out).exists())
embed_input("out-folder-read-only", _read_only)
embed_input("disk-full", _full, check=refused)
# any report or a typed refusal: whether the job read the source before it changed is its own business
embed_input("source-changed-mid-run", _vanishing, lambda report: True)


def _vanishing_page(
    run: Callable[..., Any], make: Callable[[Env], Path], server_path: str
) -> Callable[[Env], Any]:
    def call(env: Env) -> Any:
        assert env.fake is not None
        folder = make(env)
        gone = sorted(folder.iterdir())[-1]

        def rewrite(reply: Reply) -> Reply:
            gone.unlink(missing_ok=True)
            return reply

        env.fake.mutate(rewrite, path=server_path)
        try:
            with env.client() as client:
                report = run(client, folder, env.tmp / "out", concurrency=1)
        finally:
            env.fake.clear_faults()
        return report

    return call


# the page vanishes while its answer is on the way: any report, or a typed refusal
register(
    "ocr_dir",
    Call(
        _vanishing_page(vt.ocr_dir, image_folder, "/v1/chat/completions"),
        "ocr",
        label="page-vanishes-mid-run",
        check=lambda report: True,
    ),
)
for _name, _make in HOSTILE_PATHS.items():
    if _name in ("nul-byte", "non-utf8-name", "over-name-max"):
        continue

    def _odd_folder(env: Env, make: Callable[[Path], Any] = _make) -> Any:
        folder = image_folder(env)
        odd = make(env.tmp)
        (folder / ("odd" + Path(str(odd)).suffix)).symlink_to(odd)
        with env.client() as client:
            return vt.ocr_dir(client, folder, env.tmp / "out")

    register(
        "ocr_dir",
        Call(_odd_folder, "ocr", label=f"entry-{_name}", check=lambda report: report.documents_done >= 2),
    )

# ---------------------------------------------------------------------------------------------- CLI


@dataclass(frozen=True)
class CLIOutcome:
    """A command's exit code, what it printed (when it is the output) and the files it wrote."""

    code: int
    stdout: str
    files: dict[str, Any]
    traceback: bool


TYPED_EXITS = frozenset(
    {cli.EXIT_SERVER_ERROR, cli.EXIT_UNREACHABLE, cli.EXIT_JOB_REFUSED, cli.EXIT_DISK_FULL, cli.EXIT_USAGE}
)


def typed_exit(clean: CLIOutcome) -> Callable[[Any], bool]:
    """A command's answer to a broken answer: a documented exit code and one line, no traceback."""
    return lambda value: isinstance(value, CLIOutcome) and value.code in TYPED_EXITS and not value.traceback


def command(
    argv: Callable[[Env], list[str]], *, prints: bool = True, out: str | None = None
) -> Callable[[Env], Any]:
    def run(env: Env) -> CLIOutcome:
        env.tmp.mkdir(parents=True, exist_ok=True)
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.main(argv(env))
        files = written(env.tmp / out) if out and (env.tmp / out).exists() else {}
        text = stdout.getvalue() if prints else ""
        return CLIOutcome(code, text, files, "Traceback" in stderr.getvalue())

    return run


CLI_CASES = ("transient", "truncated", "html-200", "nan", "retry-after-garbage")
CLI_PLAIN = ("transient", "truncated", "html-200", "retry-after-garbage")
CLI_JOBS = ("transient",)
"""A folder job retries what failed after its default ``retry_replica_after`` (5 s) and gives up after
``give_up_after`` (120 s; the command has no option for them): the API's jobs take the other cases with short
ones."""
PIPES = frozenset({"fifo", "dev-zero", "dev-zero-link"})
"""Text read from ``--file`` may come from a pipe (``--file <(cmd)``): it is read as it comes."""


def made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write(env: Env, name: str, data: bytes) -> str:
    path = env.tmp / name
    path.write_bytes(data)
    return str(path)


def cli_register(
    name: str, argv: Callable[[Env], list[str]], cases: tuple[str, ...], server: str = "all", **kwargs: Any
) -> None:
    register(f"cli {name}", Call(command(argv, **kwargs), server, cases, accepts=typed_exit))


# probe sends each check once (max_retries=0) and reports what it saw: any report, or a documented exit
register(
    "cli probe",
    Call(
        command(lambda env: ["probe", "--json", env.url]),
        "all",
        ("truncated", "html-200"),
        accepts=lambda clean: lambda value: value.code in TYPED_EXITS | {0} and not value.traceback,
    ),
)
cli_register("embed", lambda env: ["embed", "--url", env.url, *TEXTS], CLI_CASES)
cli_register(
    "rerank", lambda env: ["rerank", "--url", env.url, "--json", "query", "a doc", "b doc"], CLI_CASES
)
cli_register(
    "transcribe", lambda env: ["transcribe", "--url", env.url, _write(env, "a.wav", wav())], CLI_PLAIN
)
cli_register(
    "ocr", lambda env: ["ocr", "--url", env.url, _write(env, "a.png", png())], CLI_PLAIN, server="ocr"
)
cli_register(
    "embed-file",
    lambda env: [
        "embed-file",
        "--url",
        env.url,
        str(text_source(env)),
        "--out",
        str(made(env.tmp / "o") / "o.npy"),
    ],
    ("transient", "nan", "retry-after-garbage"),
    prints=False,
    out="o",
)
cli_register(
    "ocr-dir",
    lambda env: ["ocr-dir", "--url", env.url, str(image_folder(env)), "--out", str(env.tmp / "out")],
    CLI_JOBS,
    server="ocr",
    prints=False,
    out="out",
)
cli_register(
    "transcribe-dir",
    lambda env: ["transcribe-dir", "--url", env.url, str(audio_folder(env)), "--out", str(env.tmp / "out")],
    CLI_JOBS,
    prints=False,
    out="out",
)


def cli_input(
    name: str,
    label: str,
    argv: Callable[[Env], list[str]],
    server: str = "all",
    codes: frozenset[int] = TYPED_EXITS,
) -> None:
    """A hostile input to a command: it must exit with one of ``codes`` (by default a documented error) and
    no traceback."""

    def check(value: Any) -> bool:
        return isinstance(value, CLIOutcome) and value.code in codes and not value.traceback

    register(f"cli {name}", Call(command(argv), server, label=label, check=check, errors=()))


for _name, _make in HOSTILE_PATHS.items():
    if _name not in PIPES:
        cli_input(
            "embed", _name, lambda env, make=_make: ["embed", "--url", env.url, "--file", str(make(env.tmp))]
        )
        cli_input(
            "rerank",
            _name,
            lambda env, make=_make: ["rerank", "--url", env.url, "--file", str(make(env.tmp)), "q"],
        )
    cli_input(
        "transcribe", _name, lambda env, make=_make: ["transcribe", "--url", env.url, str(make(env.tmp))]
    )
    cli_input("ocr", _name, lambda env, make=_make: ["ocr", "--url", env.url, str(make(env.tmp))], "ocr")
    cli_input("verify", _name, lambda env, make=_make: ["verify", env.url, "--reference", str(make(env.tmp))])
    for _job, _out, _server in (("embed-file", "o.npy", "all"), ("ocr-dir", "out", "ocr"),
                                ("transcribe-dir", "out", "all")):  # fmt: skip
        if _job == "embed-file" and _name == "huge-sparse-file":
            continue  # a 4 GiB text source is a long job, not a hostile one (as above)
        cli_input(
            _job,
            _name,
            lambda env, job=_job, out=_out, make=_make: [
                job, "--url", env.url, str(make(env.tmp)), "--out", str(env.tmp / out)
            ],
            _server,
        )  # fmt: skip
cli_input(
    "embed-file",
    "out-folder-missing",
    lambda env: [
        "embed-file",
        "--url",
        env.url,
        str(text_source(env)),
        "--out",
        str(env.tmp / "new" / "o.npy"),
    ],
    codes=frozenset({cli.EXIT_OK}),
)
cli_input("probe", "unreachable", lambda env: ["probe", "http://127.0.0.1:9"])

# A report's summary renders what its job counted: nothing hostile reaches it.
register("jobs.EmbedFileReport.summary")
register("jobs.FolderJobReport.summary")


def _text_lines(data: bytes) -> Callable[[Env], Any]:
    return lambda env: list(vt.jobs.text_lines(io.BytesIO(data), "in.txt"))


register(
    "jobs.text_lines",
    Call(_text_lines(b"caf\xe9\nok\n"), None, label="not-utf8", check=refused),
    Call(_text_lines(b"a\x00b\nok\n"), None, label="nul-byte", check=lambda lines: "ok" in lines),
    Call(
        _text_lines(b"\xef\xbb\xbfbom\r\nok\r\n"),
        None,
        label="bom-crlf",
        check=lambda lines: lines == ["bom", "ok"],
    ),
)
