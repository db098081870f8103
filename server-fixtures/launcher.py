"""Start and stop vLLM servers as process groups: free ports, /health wait, logs, memory, clean stop.

Standard library only, so that any Python (the project's dev venv, CI's system python) can import it:

    import sys; sys.path.insert(0, "server-fixtures")
    from launcher import FixtureServer
    with FixtureServer("embed") as srv:          # starts, waits for /health
        print(srv.base_url, srv.model, srv.api_key)

``Server`` runs any command line; ``FixtureServer`` runs an entry of ``fixture_table.FIXTURES`` from the
fixture venv that ``server-fixtures/setup`` builds (``fixture_pins``), or with ``vllm_version=`` from an
older release's venv (``setup --vllm VERSION``); ``gpu_recipes.GpuRecipeServer`` runs a production
recipe. Logs go to ``<cache>/logs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

import fixture_pins
from fixture_table import BASE_ENV, FIXTURES, fixture_args, fixture_env

HERE = Path(__file__).resolve().parent
VLLM_API_SERVER = "vllm.entrypoints.openai.api_server"


def logs_dir() -> Path:
    return fixture_pins.cache_dir() / "logs"


class FixtureStartError(RuntimeError):
    """The server did not become healthy; the message carries the log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _set_pdeathsig() -> None:
    """Child side of Popen: new session (own process group) and SIGTERM if the launching process dies.
    The child is group_guard.py, which turns that SIGTERM into a SIGTERM/SIGKILL of the whole group."""
    os.setsid()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _http_status(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _rss_kib_of_group(pgid: int) -> int:
    """Sum of VmRSS over all processes in a process group (Linux /proc), in KiB."""
    total = 0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:  # fields: state ppid pgrp ...
                continue
            for line in (p / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


class ForkedProcess:
    """A server forked by a :class:`Zygote`, with the part of ``subprocess.Popen`` the launcher uses.

    Its pid arrives from the zygote once the child leads its own session; its exit status from the
    file the zygote writes when it reaps the child.
    """

    def __init__(self, zygote: Zygote, exit_path: Path) -> None:
        self._zygote = zygote
        self._exit_path = exit_path
        self._pid: int | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        while self._pid is None:
            self._zygote.collect(timeout=1.0)
            if self._pid is None and not self._zygote.alive:
                raise FixtureStartError(f"the fixture zygote exited; log: {self._zygote.log_path}")
        return self._pid

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self._pid is None:
            self._zygote.collect(timeout=0.0)
            if self._pid is None:
                if self._zygote.alive:
                    return None  # the zygote is still importing vLLM or forking
                self.returncode = -1
                return self.returncode
        if self._exit_path.exists():
            text = self._exit_path.read_text().strip()
            if text:
                self.returncode = int(text)
        elif not _group_alive(self._pid):
            self.returncode = -1  # gone, its status not (yet) written
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"fixture pid {self._pid}", timeout or 0.0)
            time.sleep(0.1)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """``zygote.py`` run by ``python`` with ``env``: imports vLLM once, forks a server per :meth:`fork`.

    Servers with the same python and environment share one (the environment can change what vLLM and
    transformers decide at import time, e.g. whether torchvision is importable).
    """

    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        logs_dir().mkdir(parents=True, exist_ok=True)
        self.log_path = logs_dir() / f"zygote-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(self)}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [python, str(HERE / "zygote.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            bufsize=0,  # collect() reads each answer exactly: select() cannot see a buffered line
            env={**os.environ, **env},
            preexec_fn=_set_pdeathsig,  # noqa: PLW1509 (called before any thread starts in the child)
        )
        self._waiting: list[ForkedProcess] = []  # forks asked for, in order, whose pid is not read yet

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, argv: Sequence[str], log_path: Path) -> ForkedProcess:
        """Ask for a server (returns at once: the zygote may still be importing vLLM)."""
        exit_path = log_path.with_suffix(".exit")
        exit_path.unlink(missing_ok=True)
        assert self.proc.stdin is not None
        request = {"argv": list(argv), "log": str(log_path), "exit": str(exit_path)}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
        except OSError as e:
            raise FixtureStartError(f"the fixture zygote is gone ({e}); log: {self.log_path}") from e
        forked = ForkedProcess(self, exit_path)
        self._waiting.append(forked)
        return forked

    def collect(self, timeout: float) -> None:
        """Read the pids the zygote has answered (forks are answered in the order asked)."""
        assert self.proc.stdout is not None
        while self._waiting and select.select([self.proc.stdout], [], [], timeout)[0]:
            line = self.proc.stdout.readline()
            if not line:
                return  # the zygote exited
            self._waiting.pop(0)._pid = int(json.loads(line)["pid"])
            timeout = 0.0

    def stop(self) -> None:
        """End the zygote (its servers go with it)."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._log.close()


class Server:
    """A command line started in its own process group that serves HTTP with a /health route."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        port: int,
        host: str = "127.0.0.1",
        env: Mapping[str, str] | None = None,
        model: str | None = None,
        api_key: str | None = None,
        start_timeout: float = 300.0,
    ) -> None:
        self.name = name
        self.command = list(command)
        self.host = host
        self.port = port
        self.env = dict(env or {})
        self.model = model
        self.api_key = api_key
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        #: A zygote to fork the server from; its python and environment must be this command's own.
        self.zygote: Zygote | None = None
        self.log_path: Path | None = None
        self.start_seconds: float | None = None
        self._launched_at = 0.0
        self.log_label = name  # log file name prefix
        self._log_file = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.name} {self.base_url} {state}>"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float | None = None) -> Server:
        """Start the server (unless it runs) and wait until ``/health`` answers 200."""
        if not self.running:
            self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> Server:
        """Start the process and return at once (:meth:`wait_ready` waits for it)."""
        logs_dir().mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = logs_dir() / f"{self.log_label}-{stamp}-{self.port}.log"
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self._log_file.write(("$ " + " ".join(self.command) + "\n").encode())
        self._log_file.flush()
        env = {**os.environ, **self.env}
        self._launched_at = time.monotonic()
        self.start_seconds = None
        if self.zygote is not None and self.command[1:3] == ["-m", VLLM_API_SERVER]:
            self.proc = self.zygote.fork([VLLM_API_SERVER, *self.command[3:]], self.log_path)
            return self
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_guard.py"), *self.command],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_set_pdeathsig,  # noqa: PLW1509 (called before any thread starts in the child)
        )
        return self

    def wait_ready(self, timeout: float | None = None) -> Server:
        """Wait until the launched server answers ``/health`` 200 (``timeout`` counts from the launch).

        Raises:
            FixtureStartError: the process exited first, or ``timeout`` passed (the server is stopped).
        """
        if self.start_seconds is not None and self.running:
            return self
        if timeout is None:
            env_timeout = os.environ.get("VLLM_TASKS_FIXTURE_START_TIMEOUT")
            timeout = float(env_timeout) if env_timeout else self.start_timeout
        t0 = self._launched_at
        deadline = t0 + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                self.stop()
                raise FixtureStartError(
                    f"vLLM fixture {self.name!r} exited with code {code} before /health answered.\n"
                    f"log: {self.log_path}\n--- last lines ---\n{self.log_tail(60)}"
                )
            if _http_status(self.base_url + "/health") == 200:
                break
            if time.monotonic() > deadline:
                self.stop()
                raise FixtureStartError(
                    f"vLLM fixture {self.name!r} did not answer /health within {timeout:.0f} s.\n"
                    f"log: {self.log_path}\n--- last lines ---\n{self.log_tail(60)}"
                )
            time.sleep(0.5)
        self.start_seconds = time.monotonic() - t0
        return self

    def rss_mib(self) -> float:
        """Resident memory of the whole process group (server + engine core), MiB."""
        if not self.running or self.proc is None:
            return 0.0
        return _rss_kib_of_group(self.proc.pid) / 1024

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the process group, wait, then SIGKILL whatever is left. Leaves no process behind."""
        proc = self.proc
        if proc is not None:
            pgid = proc.pid
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                proc.poll()
                if not _group_alive(pgid):
                    break
                time.sleep(0.2)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                while _group_alive(pgid) and time.monotonic() < deadline + 10:
                    proc.poll()
                    time.sleep(0.1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, n: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Zombies still count for killpg; treat a group whose members are all zombies as gone.
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid and rest[0] != "Z":
            return True
    return False


class FixtureServer(Server):
    """A named CPU fixture from ``FIXTURES``, started from the venv of ``vllm_version`` (default: today's
    venv, fixture_pins.VLLM_VERSION; an older one from ``fixture_pins.MATRIX_VERSIONS`` needs
    ``server-fixtures/setup --vllm VERSION``)."""

    def __init__(
        self,
        name: str,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        vllm_version: str | None = None,
    ) -> None:
        if name not in FIXTURES:
            raise KeyError(f"unknown fixture {name!r}; known: {', '.join(FIXTURES)}")
        version = fixture_pins.check_version(vllm_version or fixture_pins.VLLM_VERSION)
        fx = FIXTURES[name]
        self.fixture = fx
        self.vllm_version = version
        port = port or free_port(host)
        command = [
            str(fixture_pins.server_python(version)),
            "-m",
            VLLM_API_SERVER,
            "--model",
            str(fixture_pins.models_dir() / fx.model_dir),
            "--served-model-name",
            fx.served_model_name,
            "--host",
            host,
            "--port",
            str(port),
            *fixture_args(fx, version),
        ]
        if fixture_pins.is_default_version(version):
            cache_root = fixture_pins.cache_dir() / "vllm-cache"
        else:  # compile caches of other releases stay apart (inside the venv: rebuilt with it)
            cache_root = fixture_pins.venv_dir(version) / "vllm-cache"
        super().__init__(
            name,
            command,
            port=port,
            host=host,
            env={**BASE_ENV, "VLLM_CACHE_ROOT": str(cache_root), **fixture_env(fx, version)},
            model=fx.served_model_name,
            api_key=fx.api_key,
            start_timeout=fx.start_timeout,
        )
        if not fixture_pins.is_default_version(version):
            self.log_label = f"{name}-vllm-{version}"

    def launch(self) -> FixtureServer:
        """Start the process (after checking setup was done) and return at once."""
        if fixture_pins.is_default_version(self.vllm_version):
            missing = fixture_pins.setup_missing([self.name])
        else:
            missing = fixture_pins.setup_missing([self.name], version=self.vllm_version)
        if missing:
            setup = "server-fixtures/setup"
            if not fixture_pins.is_default_version(self.vllm_version):
                setup += f" --vllm {self.vllm_version}"
            raise FixtureStartError(
                f"vLLM fixture {self.name!r} (vLLM {self.vllm_version}): setup is not done "
                f"({'; '.join(missing)}). Run {setup} first."
            )
        super().launch()
        return self
