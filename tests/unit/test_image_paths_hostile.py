"""Image paths that are not image files: a FIFO, a device (or a symlink to one), a folder, a missing file, a
name that cannot be a path, a file over the size cap. Each is refused with an ``InvalidInputError`` naming
the path, within a stated time (a FIFO must not wait for a writer, ``/dev/zero`` must not be read), by the
image helpers and by every client call that takes image paths, before anything is sent. ``AsyncClient``
reads image files in a worker thread."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import defaults, images

SECONDS = 5.0
"""The most a refusal may take (each takes milliseconds; a FIFO read would wait forever)."""

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)
"""A 1x1 PNG."""


def within(call: Callable[[], Any], seconds: float = SECONDS) -> Any:
    """``call()``'s result or the exception it raised, in a thread waited on for ``seconds`` at most: a
    call that hangs fails the test instead of hanging it (the thread is a daemon, left behind)."""
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # handed to the test
            outcome.append(error)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(seconds), f"no answer within {seconds} s"
    return outcome[0]


def refused(call: Callable[[], Any]) -> vt.InvalidInputError:
    error = within(call)
    assert isinstance(error, vt.InvalidInputError), error
    return error


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    return path


READERS: dict[str, Callable[[Any], Any]] = {
    "image_to_data_url": images.image_to_data_url,
    "image_to_data_url(str)": lambda path: images.image_to_data_url(str(path)),
    "image_content_part": lambda path: images.image_content_part(path, field="documents[0]"),
    "prepare_image": images.prepare_image,
}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_fifo_is_refused_without_waiting_for_a_writer(read: Callable[[Any], Any], fifo: Path) -> None:
    error = refused(lambda: read(fifo))
    assert error.kind == "argument" and error.value == str(fifo)
    assert "is a FIFO (named pipe), not a regular file" in str(error)


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_device_and_a_symlink_to_it_are_refused_unread(read: Callable[[Any], Any], tmp_path: Path) -> None:
    link = tmp_path / "zero.png"
    link.symlink_to("/dev/zero")
    for path in (Path("/dev/zero"), link):
        error = refused(lambda path=path: read(path))  # type: ignore[misc]
        assert error.value == str(path) and "is a device, not a regular file" in str(error)


def test_a_folder_and_a_missing_file_are_refused_naming_the_path(tmp_path: Path) -> None:
    assert "is a folder" in str(refused(lambda: images.image_to_data_url(tmp_path)))
    missing = tmp_path / "missing.png"
    error = refused(lambda: images.image_to_data_url(missing))
    assert error.value == str(missing) and "No such file" in str(error)


@pytest.mark.parametrize(
    "name",
    ["a\0b.png", "~nobody\0/a.png", "\ud800.png", os.fsdecode(b"\xff\xfe.png")],
    ids=["nul", "nul-after-tilde", "lone-surrogate", "non-utf-8"],
)
@pytest.mark.parametrize("wrap", [str, Path], ids=["str", "Path"])
def test_a_name_that_cannot_be_a_path_is_refused_typed(name: str, wrap: Callable[[str], Any]) -> None:
    error = refused(lambda: images.image_to_data_url(wrap(name), field="images[0]"))
    assert error.field == "images[0]" and error.value == name and "cannot be read" in str(error)


def test_a_file_over_the_default_cap_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as handle:  # sparse: nothing written, nothing read
        handle.truncate(defaults.IMAGE_MAX_BYTES + 1)
    error = refused(lambda: images.image_to_data_url(big))
    assert error.kind == "image_too_large" and f"{defaults.IMAGE_MAX_BYTES:,} bytes" in str(error)


def test_the_cap_is_inclusive(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(PNG)
    assert images.read_regular_file(path, "image", max_bytes=len(PNG)) == PNG
    error = refused(lambda: images.read_regular_file(path, "image", max_bytes=len(PNG) - 1))
    assert error.kind == "image_too_large"


def test_an_endless_file_object_stops_at_the_cap() -> None:
    class Endless:
        def read(self, size: int = -1) -> bytes:
            assert size > 0, "read whole"
            return b"\0" * size

    error = refused(lambda: images.image_to_data_url(Endless()))
    assert error.kind == "image_too_large" and "defaults.IMAGE_MAX_BYTES" in str(error)


CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "embed": lambda client, path: client.embed(images=[path]),
    "embed_v2": lambda client, path: client.embed_v2(images=[path]),
    "pool": lambda client, path: client.pool(images=[path]),
    "rerank": lambda client, path: client.rerank("query", [path]),
    "score": lambda client, path: client.score("query", [path]),
    "ocr": lambda client, path: client.ocr(path),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_the_clients_refuse_a_fifo_before_sending(
    call: Callable[[Any, Any], Any], fifo: Path, make_client: Any
) -> None:
    """No request is registered: one sent would fail the test (pytest-httpx)."""
    error = refused(lambda: call(make_client(), fifo))
    assert str(fifo) in str(error) and "FIFO" in str(error)


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_async_clients_read_image_files_off_the_event_loop(
    call: Callable[[Any, Any], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(PNG)
    readers: list[threading.Thread] = []
    real = images.read_regular_file

    def read(*args: Any, **kwargs: Any) -> bytes:
        readers.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(images, "read_regular_file", read)
    monkeypatch.setattr(vt.AsyncClient, "server_info", _stop)

    async def run() -> None:
        async with vt.AsyncClient("http://127.0.0.1:9", max_retries=0) as client:
            with pytest.raises(_Stop):
                await call(client, path)

    asyncio.run(run())
    assert readers and threading.main_thread() not in readers


class _Stop(Exception):
    """Raised where the call would first ask the server: the image was read by then."""


async def _stop(*_args: Any, **_kwargs: Any) -> Any:
    raise _Stop
