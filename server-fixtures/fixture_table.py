"""The CPU fixture table: which vLLM fixtures exist, the model directory each serves, its flags and env.

Data only (standard library); ``launcher.FixtureServer(name)`` starts an entry, ``server-fixtures/setup``
builds the model directories they name, and the pytest plugin makes one session fixture per entry.

To add a fixture: add one ``Fixture`` entry to ``FIXTURES``. If it needs a new model directory, add the
name to ``fixture_pins.MODELS`` and a ``build_<name>`` function to ``build_models.py`` (a helper module that
function imports goes into ``fixture_pins.BUILDER_MODULES``). pip packages it needs go into
``fixture_pins.VENV_ADDON_PACKAGES`` (added to the existing venv; ``VENV_EXTRA_PACKAGES`` rebuilds it).
Setup, ``serve`` and the pytest plugin pick it up from there.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: Key the `api-key` fixture is started with (a test key, not a secret).
TEST_API_KEY = "vllm-tasks-test-key"

#: vLLM's engine and its one worker in the API server's process (VLLM_ENABLE_V1_MULTIPROCESSING=0 with the
#: `uni` executor) instead of two more processes, each importing vLLM again: MiniLM is up in 22 s instead of
#: 31 s on 2 cores, with the same HTTP API. Today's vLLM only (VERSION_FLAGS puts older ones back).
IN_PROCESS_ENGINE_ENV: dict[str, str] = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
IN_PROCESS_ENGINE_ARGS: tuple[str, ...] = ("--distributed-executor-backend", "uni")

BASE_ENV: dict[str, str] = {
    **IN_PROCESS_ENGINE_ENV,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

MINILM_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--runner",
    "pooling",
    "--max-model-len",
    "256",
    "--dtype",
    "float32",
    # No torch.compile warm-up: starts in ~25 s instead of ~50 s cold, same throughput on this CPU.
    "--enforce-eager",
)

#: vLLM's own embedding-test template (tests/entrypoints/pooling/embed/test_online.py): MiniLM's tokenizer
#: has none, and chat-style requests (`messages`) need one. Completion-style requests are unaffected.
DUMMY_CHAT_TEMPLATE = (
    "{% for message in messages %}{{message['role'] + ': ' + message['content'] + '\\n'}}{% endfor %}"
)

#: The OCR fixtures' cap on generated tokens per request (``--override-generation-config``).
OCR_MAX_NEW_TOKENS = 48

#: The DeepSeek-OCR family on CPU: dummy weights, float32, eager, no multimodal profiling, a 4096-token
#: context, and the recipe's cache flags (--no-enable-prefix-caching, --mm-processor-cache-gb 0): what makes
#: it start in about a minute on 2 cores (cpu-fixture-models.md, "DeepSeek-OCR request path").
DEEPSEEK_FAMILY_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
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

#: DeepSeek-OCR on CPU: tiny language model, real vision encoder and processor, weights from a fixed seed.
OCR_ARGS: tuple[str, ...] = (
    *DEEPSEEK_FAMILY_ARGS,
    # A server-wide cap on generated tokens (vLLM: max_new_tokens in the generation config is the upper
    # bound of every request's max_tokens): the random tiny model otherwise writes until the context is full,
    # 50-80 s a page on 2 cores. 48 covers the tests' largest max_tokens (40).
    "--override-generation-config",
    json.dumps({"max_new_tokens": OCR_MAX_NEW_TOKENS}),
)


def cache_dir() -> Path:
    """The fixture cache: ``$VLLM_TASKS_FIXTURE_CACHE``, default ``~/.cache/vllm-tasks-fixtures``."""
    env = os.environ.get("VLLM_TASKS_FIXTURE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "vllm-tasks-fixtures"


def pure_torchvision_dir() -> Path:
    """PyPI's torchvision (a CUDA build) without its compiled parts, for a server's ``PYTHONPATH``.

    Its Python transforms run on the CPU torch as they are; what the compiled ``_C.so``/``image.so`` held
    (``nms``, ``roi_align``, image decoding) is absent, and the two fake-kernel registrations that assume
    ``_C.so`` are guarded (``server-fixtures/setup``). transformers' torchvision image and video processors
    and vLLM's multimodal processors need no more; the stand-in below only lets them import.
    """
    return cache_dir() / "torchvision-pure"


#: torchvision's Python parts on a server's path (see `pure_torchvision_dir`).
PURE_TORCHVISION_ENV: dict[str, str] = {"PYTHONPATH": str(pure_torchvision_dir())}
OCR_NGRAM_PROCESSOR = "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
#: The torchvision stand-in (server-fixtures/torchvision_standin/) on a server's path: the OCR, ColPali and
#: Qwen3-ASR servers' only.
TORCHVISION_STANDIN_ENV: dict[str, str] = {"PYTHONPATH": str(HERE / "torchvision_standin")}
OCR_ENV: dict[str, str] = {
    **TORCHVISION_STANDIN_ENV,
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
}

#: Whisper base on CPU (cpu-fixture-models.md, "Whisper base from CTranslate2 files"): weights are stored
#: float16 and served float32 (no bf16 on this CPU); --enforce-eager skips a 2-4 minute compile.
STT_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--max-model-len",
    "448",
    "--enforce-eager",
    "--dtype",
    "float32",
)


#: The Voxtral fixture's cap on generated tokens per request (the random tiny model never writes EOS).
VOXTRAL_MAX_NEW_TOKENS = 24

#: Voxtral as its model card serves it (the mistral tokenizer, config and weights), plus float32, eager and
#: a small context for the 2-core machine: one 30 s audio window is 375 prompt tokens.
VOXTRAL_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--tokenizer-mode",
    "mistral",
    "--config-format",
    "mistral",
    "--load-format",
    "mistral",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "2048",
    "--override-generation-config",
    json.dumps({"max_new_tokens": VOXTRAL_MAX_NEW_TOKENS}),
)


#: The model-family zoo (build_zoo.py): tiny seeded checkpoints served with their family's production flags,
#: plus what lets them start in about 30 s on 2 cores (float32, eager).
ZOO_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--runner",
    "pooling",
    "--dtype",
    "float32",
    "--enforce-eager",
)

#: Qwen3-Reranker as its operators serve it (vLLM's examples/pooling/score/qwen3_reranker_online.sh): the
#: causal LM read as a one-label classifier, score = P(yes) over the "no"/"yes" logits at the last token.
QWEN3_RERANKER_OVERRIDES: dict[str, object] = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}
QWEN3_RERANKER_ARGS: tuple[str, ...] = (
    *ZOO_ARGS,
    "--convert",
    "classify",
    "--max-model-len",
    "2048",
    "--hf-overrides",
    json.dumps(QWEN3_RERANKER_OVERRIDES),
)
#: The score template of the original Qwen3-Reranker checkpoints (the model card's prompt).
QWEN3_RERANKER_TEMPLATE = HERE / "templates" / "qwen3_reranker.jinja"


def bge_m3_args(task: str) -> tuple[str, ...]:
    """BGE-M3 as its operators serve it (its config says ``XLMRobertaModel``) with ``task`` active:
    ``token_classify`` for the lexical weights, ``token_embed`` for the ColBERT vectors."""
    return (
        *ZOO_ARGS,
        "--max-model-len",
        "512",
        "--hf-overrides",
        json.dumps({"architectures": ["BgeM3EmbeddingModel"]}),
        "--pooler-config",
        json.dumps({"task": task}),
    )


#: The fixtures' cap on generated tokens per transcription (``--override-generation-config``); the
#: reference generates as many. Realtime is not capped by it: vLLM gives each realtime segment
#: ``realtime_max_tokens`` (64 for Qwen3-ASR).
QWEN3_ASR_MAX_NEW_TOKENS = 24
#: Qwen3-ASR served as its realtime class: one server answers /v1/audio/transcriptions (the offline model's
#: code path, which the realtime class subclasses) and the WebSocket /v1/realtime. vLLM's Qwen3-ASR imports
#: the Qwen2.5-Omni model code, which imports torchvision: the stand-in is on the path.
QWEN3_ASR_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "1024",
    "--hf-overrides",
    json.dumps({"architectures": ["Qwen3ASRRealtimeGeneration"]}),
    "--override-generation-config",
    json.dumps({"max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS}),
)

#: The torchaudio stand-in (server-fixtures/torchaudio_standin/: ``MelSpectrogram`` only) on a server's path:
#: transformers' Granite Speech feature extractor, which vLLM runs, needs torchaudio. The Granite Speech
#: server's only.
TORCHAUDIO_STANDIN_ENV: dict[str, str] = {"PYTHONPATH": str(HERE / "torchaudio_standin")}
#: The Granite Speech fixture's cap on generated tokens per request (the reference generates as many).
GRANITE_SPEECH_MAX_NEW_TOKENS = 24
#: Granite Speech with vLLM's defaults, plus float32, eager and a small context: 30 s of audio (the longest
#: vLLM sends at once) is 300 prompt tokens.
GRANITE_SPEECH_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "1024",
    "--override-generation-config",
    json.dumps({"max_new_tokens": GRANITE_SPEECH_MAX_NEW_TOKENS}),
)

#: The GLM-ASR fixture's cap on generated tokens per request (the reference generates as many).
GLM_ASR_MAX_NEW_TOKENS = 24
#: GLM-ASR with vLLM's defaults, plus float32, eager and a small context: vLLM sends up to 655 s at once
#: (the processor's ``max_audio_len``), 12.5 prompt tokens a second, so recordings over about 80 s are
#: over this context (vLLM's 400).
GLM_ASR_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "1024",
    "--override-generation-config",
    json.dumps({"max_new_tokens": GLM_ASR_MAX_NEW_TOKENS}),
)


#: The OCR reference fixtures' cap on generated tokens per request; their references generate as many.
OCR_REFERENCE_MAX_NEW_TOKENS = 16
#: dots.ocr as its recipe serves it (``--trust-remote-code``: vLLM reads its config class from the model
#: directory), plus float32, eager and a small context for the 2-core machine.
DOTS_OCR_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--trust-remote-code",
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "2048",
    "--override-generation-config",
    json.dumps({"max_new_tokens": OCR_REFERENCE_MAX_NEW_TOKENS}),
)


def deepseek_family_args(ngram_processor: str, *extra: str) -> tuple[str, ...]:
    """A DeepSeek-OCR-family reference fixture's flags: its recipe's n-gram processor, no prefix cache and
    no processor cache, on dummy weights, plus float32, eager, no multimodal profiling, a 4096-token context
    and the OCR reference token cap."""
    return (
        *DEEPSEEK_FAMILY_ARGS,
        "--logits-processors",
        ngram_processor,
        *extra,
        "--override-generation-config",
        json.dumps({"max_new_tokens": OCR_REFERENCE_MAX_NEW_TOKENS}),
    )


#: Unlimited-OCR's n-gram processor, as its recipe names it (vLLM's module re-exports DeepSeek-OCR's).
UNLIMITED_OCR_NGRAM_PROCESSOR = "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor"
#: Unlimited-OCR with the recipe's flags (its n-gram processor, no prefix cache, no processor cache) and the
#: ``ocr`` fixture's dummy weights, plus one flag the CPU needs: vLLM's Unlimited-OCR config sets the vision
#: encoder's attention to FLASH_ATTN, which vLLM's CPU build refuses ("Backend AttentionBackendEnum.FLASH_ATTN
#: is not supported for vit attention"); TORCH_SDPA is the one it takes. The language model's R-SWA backends
#: (FA4, Triton, FlexAttention) do not exist on CPU either: vLLM logs "Cannot use TRITON_ATTN backend on CPU"
#: and runs its CPU attention, which is the same for the 16 tokens written here (the window is 128).
UNLIMITED_OCR_ARGS: tuple[str, ...] = deepseek_family_args(
    UNLIMITED_OCR_NGRAM_PROCESSOR, "--mm-encoder-attn-backend", "TORCH_SDPA"
)

#: DeepSeek-OCR-2 with DeepSeek-OCR's recipe (its n-gram processor, no prefix cache, no processor cache) on
#: dummy weights, like ``ocr``: vLLM fixes its vision towers at their real size (build_deepseek_ocr2.py).
DEEPSEEK_OCR2_ARGS: tuple[str, ...] = deepseek_family_args(OCR_NGRAM_PROCESSOR)

#: What every OCR reference fixture adds to its recipe's flags: float32, eager, no profiling run of the image
#: encoder, a small context and the token cap (random weights never write EOS).
OCR_REFERENCE_ARGS: tuple[str, ...] = (
    *IN_PROCESS_ENGINE_ARGS,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--skip-mm-profiling",
    "--max-model-len",
    "1024",
    "--override-generation-config",
    json.dumps({"max_new_tokens": OCR_REFERENCE_MAX_NEW_TOKENS}),
)
#: The cache flags of the OCR recipes (PaddleOCR-VL, LightOnOCR, DeepSeek-OCR): one page is one request,
#: nothing to reuse.
OCR_CACHE_ARGS: tuple[str, ...] = ("--no-enable-prefix-caching", "--mm-processor-cache-gb", "0")
#: PaddleOCR-VL as vLLM's recipe serves it (recipes/PaddlePaddle/PaddleOCR-VL.md), less its
#: --trust-remote-code: that runs the release's own processor code, which the fixture (transformers' native
#: PaddleOCR-VL, no remote code) lacks; with it, vLLM 0.32 reads the remote processor's ``max_pixels`` and
#: fails to start ("'PaddleOCRVLImageProcessorPil' object has no attribute 'max_pixels'").
PADDLEOCR_VL_ARGS: tuple[str, ...] = (
    *OCR_REFERENCE_ARGS,
    "--max-num-batched-tokens",
    "16384",
    *OCR_CACHE_ARGS,
)

#: GLM-OCR as vLLM's recipe serves it (recipes/GLM/GLM-OCR.md: no flags; its MTP speculative decoding is an
#: option the tiny checkpoint has no layers for), images only: without video vLLM's start skips the
#: processor warm-up on a dummy 16-frame video (21 s of the start on 2 cores). Its processor (Glm46VProcessor)
#: needs torchvision.
GLM_OCR_ARGS: tuple[str, ...] = (
    *OCR_REFERENCE_ARGS,
    "--limit-mm-per-prompt",
    json.dumps({"image": 1, "video": 0}),
)
#: LightOnOCR-2 as its model card serves it (one image a request, the cache flags), run by vLLM's own
#: LightOnOCRForConditionalGeneration: that class imports torchvision (through Mistral-3 and Pixtral), so
#: the pure torchvision is on the path; without it vLLM falls back to its Transformers backend.
LIGHTON_OCR_ARGS: tuple[str, ...] = (
    *OCR_REFERENCE_ARGS,
    "--limit-mm-per-prompt",
    json.dumps({"image": 1}),
    *OCR_CACHE_ARGS,
)

#: Qwen2.5-VL as olmOCR's pipeline serves it (``--limit-mm-per-prompt '{"video": 0}'``: no video encoder
#: budget; the recipe adds nothing), plus the OCR reference flags. One server is both the olmOCR and the
#: Nanonets-OCR2 preset's model.
QWEN2_5_VL_ARGS: tuple[str, ...] = (*OCR_REFERENCE_ARGS, "--limit-mm-per-prompt", json.dumps({"video": 0}))

#: HunyuanOCR as vLLM's recipe serves it (no prefix caching, no multimodal processor cache), plus the OCR
#: reference flags. vLLM 0.32 runs it on its Transformers backend (TransformersMultiModalForCausalLM).
HUNYUAN_OCR_ARGS: tuple[str, ...] = (*OCR_REFERENCE_ARGS, *OCR_CACHE_ARGS)
#: The HunyuanOCR server's path: pure torchvision, and server-fixtures/onednn_contiguous/ (its README:
#: vllm-cpu's oneDNN GEMM refuses the non-contiguous input transformers' HunYuanVL patch merger gives it).
HUNYUAN_OCR_ENV: dict[str, str] = {
    "PYTHONPATH": os.pathsep.join((str(HERE / "onednn_contiguous"), str(pure_torchvision_dir())))
}

#: Qianfan-OCR with vLLM's defaults (no recipe names flags for it), plus the OCR reference flags.
QIANFAN_OCR_ARGS: tuple[str, ...] = OCR_REFERENCE_ARGS


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


@dataclasses.dataclass(frozen=True)
class VersionFlags:
    """A flag difference of older vLLM releases (``fixture_pins.MATRIX_VERSIONS``): applied to a fixture's
    args and env when the server's vLLM version is below ``before``. Example: a flag that 0.12 renamed,
    ``VersionFlags(before="0.12.0", why="...", drop=("--new-flag",), add=("--old-flag", "v"))``."""

    before: str  # applies to versions < before
    why: str
    fixtures: tuple[str, ...] | None = None  # None: every fixture
    drop: tuple[str, ...] = ()  # flags removed, with their value when they have one
    add: tuple[str, ...] = ()  # appended after the fixture's own args
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)


#: Per-version differences, applied in order. Beyond the in-process engine (today's vLLM only), `embed`,
#: `rerank`, `embed-mrl` and `api-key` start with today's flags on every version from 0.11.0 to 0.32.0.
#: (`late-interaction` is not portable by flags: 0.16 refuses --pooler-config's "task", and before 0.23
#: /score does no MaxSim with it; see docs/fixtures.md, "The version matrix".)
VERSION_FLAGS: tuple[VersionFlags, ...] = (
    VersionFlags(
        before="0.32.0",
        why="the in-process engine is proven on today's vLLM only: older releases keep their processes",
        drop=IN_PROCESS_ENGINE_ARGS[:1],
        env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    ),
)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("+", maxsplit=1)[0].split(".")[:3])


def _rules(fx: Fixture, version: str | None) -> list[VersionFlags]:
    if version is None:
        return []
    key = version_key(version)
    return [
        r
        for r in VERSION_FLAGS
        if key < version_key(r.before) and (r.fixtures is None or fx.name in r.fixtures)
    ]


def fixture_args(fx: Fixture, version: str | None = None) -> tuple[str, ...]:
    """``fx.args`` as the server of this vLLM version needs them (VERSION_FLAGS applied)."""
    args = list(fx.args)
    for rule in _rules(fx, version):
        kept: list[str] = []
        i = 0
        while i < len(args):
            if args[i] in rule.drop:
                has_value = i + 1 < len(args) and not args[i + 1].startswith("--")
                i += 2 if has_value else 1
                continue
            kept.append(args[i])
            i += 1
        args = [*kept, *rule.add]
    return tuple(args)


def fixture_env(fx: Fixture, version: str | None = None) -> dict[str, str]:
    """``fx.env`` plus the VERSION_FLAGS env for this vLLM version."""
    env = dict(fx.env)
    for rule in _rules(fx, version):
        env.update(rule.env)
    return env


FIXTURES: dict[str, Fixture] = {
    f.name: f
    for f in (
        Fixture(
            name="embed",
            model_dir="minilm",
            served_model_name="minilm",
            args=(*MINILM_ARGS, "--chat-template", DUMMY_CHAT_TEMPLATE),
            description="all-MiniLM-L6-v2 bi-encoder, 384 dims: /v1/embeddings (also chat-style, with vLLM's "
            "test chat template), /v2/embed, /score, /rerank",
        ),
        Fixture(
            name="embed-mrl",
            model_dir="minilm",
            served_model_name="minilm-mrl",
            args=(*MINILM_ARGS, "--hf-overrides", json.dumps({"matryoshka_dimensions": [128, 256, 384]})),
            description="the same weights declared Matryoshka [128, 256, 384]: `dimensions` works",
        ),
        Fixture(
            name="embed-matryoshka",
            model_dir="minilm",
            served_model_name="minilm-matryoshka",
            args=(*MINILM_ARGS, "--hf-overrides", json.dumps({"is_matryoshka": True})),
            description="the same weights declared Matryoshka at any width: `dimensions` over 384 is refused "
            "from vLLM 0.24, silently ignored before (the version gates' test)",
        ),
        Fixture(
            name="rerank",
            model_dir="minilm-rerank",
            served_model_name="minilm-rerank",
            args=MINILM_ARGS,
            description="MiniLM encoder + seeded 1-label head: cross-encoder /score, /rerank, /classify",
        ),
        Fixture(
            name="classify",
            model_dir="minilm-topics",
            served_model_name="minilm-topics",
            args=MINILM_ARGS,
            description="MiniLM encoder + seeded 4-label single-label head (softmax): /classify",
        ),
        Fixture(
            name="classify-multilabel",
            model_dir="minilm-topics-multilabel",
            served_model_name="minilm-topics-multilabel",
            args=MINILM_ARGS,
            description="MiniLM encoder + seeded 4-label head, problem_type multi_label_classification "
            "(sigmoid): /classify",
        ),
        Fixture(
            name="token-classify",
            model_dir="minilm-ner",
            served_model_name="minilm-ner",
            args=MINILM_ARGS,
            description="MiniLM encoder + seeded BIO token-classification head (BertForTokenClassification): "
            "/pooling task token_classify",
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
            name="listwise",
            model_dir="jina-reranker-tiny",
            served_model_name="jina-reranker-tiny",
            args=(*ZOO_ARGS, "--max-model-len", "8192"),
            description="jina-reranker-v3's architecture (JinaForRanking), tiny, seeded: listwise /rerank "
            "and /score (one prompt per list), /pooling per-token rows for a whole list",
        ),
        Fixture(
            name="qwen3-embedding",
            model_dir="qwen3-embedding-tiny",
            served_model_name="qwen3-embedding-tiny",
            args=(
                *ZOO_ARGS,
                "--max-model-len",
                "2048",
                "--hf-overrides",
                json.dumps({"is_matryoshka": True}),
            ),
            description="Qwen3-Embedding's layout (Qwen3ForCausalLM, last-token pooling from its "
            "sentence-transformers files, query/document prompts, Matryoshka), tiny, seeded: "
            "/v1/embeddings, /v2/embed input_type",
        ),
        Fixture(
            name="clip",
            model_dir="clip-tiny",
            served_model_name="clip-tiny",
            args=(*ZOO_ARGS, "--max-model-len", "77"),
            description="CLIPModel (tiny, seeded) as CLIPEmbeddingModel: /v1/embeddings for texts and, "
            "through chat-style messages, images; /score and /rerank with image documents (cosine)",
        ),
        Fixture(
            name="colpali",
            model_dir="colpali-tiny",
            served_model_name="colpali-tiny",
            args=(
                *ZOO_ARGS,
                "--max-model-len",
                "512",
                # PIL image processing: with the stand-in importable, transformers would pick torchvision's
                "--mm-processor-kwargs",
                json.dumps({"backend": "pil"}),
            ),
            env=TORCHVISION_STANDIN_ENV,
            description="ColPali's architecture (ColPaliForRetrieval: PaliGemma with SigLIP and Gemma, "
            "a 16-wide multi-vector head), tiny, seeded: /pooling token_embed for texts and page images, "
            "/score and /rerank by MaxSim with image documents",
        ),
        Fixture(
            name="qwen3-embedding-misconfigured",
            model_dir="qwen3-embedding-tiny-bare",
            served_model_name="qwen3-embedding-tiny",
            args=(
                *ZOO_ARGS,
                "--max-model-len",
                "64",
                "--pooler-config",
                json.dumps({"pooling_type": "MEAN", "use_activation": False}),
            ),
            description="the qwen3-embedding weights served wrong on purpose (verify's proof): MEAN pooling "
            "instead of last-token, no normalisation, a 64-token context, no prompts file",
        ),
        Fixture(
            name="qwen3-reranker",
            model_dir="qwen3-reranker-tiny",
            served_model_name="qwen3-reranker-tiny",
            args=(*QWEN3_RERANKER_ARGS, "--chat-template", str(QWEN3_RERANKER_TEMPLATE)),
            description="Qwen3-Reranker's architecture (Qwen3ForCausalLM), tiny, seeded, with the recipe's "
            "flags: --convert classify, the yes/no hf-overrides and the score template; /score, /rerank",
        ),
        Fixture(
            name="reward",
            model_dir="qwen3-reward-tiny",
            served_model_name="qwen3-reward-tiny",
            args=(*ZOO_ARGS, "--max-model-len", "512"),
            description="a sequence reward model in Skywork-Reward-V2-Qwen3's layout "
            "(Qwen3ForSequenceClassification, one label), tiny, seeded, with a ChatML template: /pooling "
            "with `messages` (classify active: one raw reward per conversation; token_classify refused)",
        ),
        Fixture(
            name="token-reward",
            model_dir="qwen2-reward-tiny",
            served_model_name="qwen2-reward-tiny",
            args=(*ZOO_ARGS, "--max-model-len", "512"),
            description="a token reward model in Qwen2.5-Math-RM's layout (Qwen2ForRewardModel), tiny, "
            "seeded, with a ChatML template: /pooling with `messages` (token_classify active: one raw "
            "reward per token)",
        ),
        Fixture(
            name="qwen3-reranker-no-template",
            model_dir="qwen3-reranker-tiny",
            served_model_name="qwen3-reranker-tiny",
            args=QWEN3_RERANKER_ARGS,
            description="`qwen3-reranker` without --chat-template: query and document concatenated, the "
            "instruction ignored, scores meaningless and no error (the SDK's advisory)",
        ),
        Fixture(
            name="splade",
            model_dir="splade-minilm",
            served_model_name="splade-minilm",
            args=(
                *ZOO_ARGS,
                "--max-model-len",
                "512",
                "--hf-overrides",
                json.dumps({"architectures": ["BertSpladeSparseEmbeddingModel"]}),
            ),
            description="SPLADE's architecture (a BertForMaskedLM served as BertSpladeSparseEmbeddingModel): "
            "MiniLM's encoder and a seeded MLM head; /v1/embeddings answers 30522-wide, mostly-zero vectors",
        ),
        Fixture(
            name="bge-m3",
            model_dir="bge-m3-tiny",
            served_model_name="bge-m3-tiny",
            args=bge_m3_args("token_classify"),
            description="BGE-M3's architecture (BgeM3EmbeddingModel: XLM-R + sparse_linear.pt + "
            "colbert_linear.pt), tiny, seeded, token_classify active: /pooling answers a lexical weight per "
            "token (BOS/EOS rows left out); /v1/embeddings 501",
        ),
        Fixture(
            name="bge-m3-colbert",
            model_dir="bge-m3-tiny",
            served_model_name="bge-m3-tiny",
            args=bge_m3_args("token_embed"),
            description="the bge-m3 weights with their ColBERT head active (token_embed): /pooling answers a "
            "normalised colbert_linear vector per token (the BOS row left out), /score and /rerank by MaxSim",
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
            name="qwen3-aligner",
            model_dir="qwen3-forcedaligner-tiny",
            served_model_name="qwen3-forcedaligner-tiny",
            args=(
                *ZOO_ARGS,
                "--max-model-len",
                "2048",
                # vLLM's recipe (examples/pooling/token_classify/forced_alignment_online.py): the client
                # sends the aligner's raw prompt as the request's chat template.
                "--trust-request-chat-template",
            ),
            # vLLM's Qwen3-ASR classes import the Qwen2.5-Omni chain, which imports torchvision.
            env=TORCHVISION_STANDIN_ENV,
            description="Qwen3-ForcedAligner's layout (Qwen3ASRForcedAlignerForTokenClassification: the "
            "Qwen3-ASR audio tower and LM with a 40-class time head), tiny, seeded: /pooling "
            "token_classify with audio, one row of class scores per prompt token",
        ),
        Fixture(
            name="stt",
            model_dir="whisper-base",
            served_model_name="whisper-base",
            args=STT_ARGS,
            description="openai/whisper-base from CTranslate2 files: /v1/audio/transcriptions, /translations",
        ),
        Fixture(
            name="voxtral",
            model_dir="voxtral-tiny",
            served_model_name="voxtral-tiny",
            args=VOXTRAL_ARGS,
            description="Voxtral's architecture (VoxtralForConditionalGeneration), tiny, seeded, in the "
            "mistral format: /v1/audio/transcriptions (text follows the recording, 24 tokens), "
            "/translations, /v1/chat/completions with audio",
        ),
        Fixture(
            name="qwen3-asr",
            model_dir="qwen3-asr-tiny",
            served_model_name="qwen3-asr-tiny",
            args=QWEN3_ASR_ARGS,
            env=TORCHVISION_STANDIN_ENV,
            description="Qwen3-ASR's architecture (tiny, seeded) served as Qwen3ASRRealtimeGeneration: "
            "/v1/audio/transcriptions and /translations, the WebSocket /v1/realtime",
        ),
        Fixture(
            name="qwen2-5-vl",
            model_dir="qwen2-5-vl-tiny",
            served_model_name="qwen2-5-vl-tiny",
            args=QWEN2_5_VL_ARGS,
            env=PURE_TORCHVISION_ENV,
            description="Qwen2.5-VL's architecture (olmOCR-2, Nanonets-OCR2), tiny, seeded, on vLLM's own "
            "class with pure torchvision: /v1/chat/completions for the olmocr and nanonets-ocr2 presets",
        ),
        Fixture(
            name="hunyuan-ocr",
            model_dir="hunyuan-ocr-tiny",
            served_model_name="hunyuan-ocr-tiny",
            args=HUNYUAN_OCR_ARGS,
            env=HUNYUAN_OCR_ENV,
            description="HunyuanOCR's architecture (HunYuanVLForConditionalGeneration), tiny, seeded, on "
            "vLLM's Transformers backend with pure torchvision: /v1/chat/completions for the hunyuan-ocr "
            "preset",
        ),
        Fixture(
            name="qianfan-ocr",
            model_dir="qianfan-ocr-tiny",
            served_model_name="qianfan-ocr-tiny",
            args=QIANFAN_OCR_ARGS,
            env=PURE_TORCHVISION_ENV,
            description="Qianfan-OCR's architecture (QianfanOCRForConditionalGeneration), tiny, seeded, on "
            "vLLM's own class with pure torchvision: /v1/chat/completions for the qianfan-ocr preset",
        ),
        Fixture(
            name="granite-speech",
            model_dir="granite-speech-tiny",
            served_model_name="granite-speech-tiny",
            args=GRANITE_SPEECH_ARGS,
            env=TORCHAUDIO_STANDIN_ENV,
            description="Granite Speech's architecture (GraniteSpeechForConditionalGeneration), tiny, "
            "seeded: /v1/audio/transcriptions and /translations (text follows the recording, 24 tokens)",
        ),
        Fixture(
            name="glm-asr",
            model_dir="glm-asr-tiny",
            served_model_name="glm-asr-tiny",
            args=GLM_ASR_ARGS,
            description="GLM-ASR's architecture (GlmAsrForConditionalGeneration), tiny, seeded: "
            "/v1/audio/transcriptions and /translations (text follows the recording, 24 tokens)",
        ),
        Fixture(
            name="dots-ocr",
            model_dir="dots-ocr-tiny",
            served_model_name="dots-ocr-tiny",
            args=DOTS_OCR_ARGS,
            env=PURE_TORCHVISION_ENV,
            description="dots.ocr's architecture (DotsOCRForCausalLM: its vision tower, Qwen2 LM, remote "
            "config code), tiny, seeded, with the recipe's --trust-remote-code: /v1/chat/completions with an "
            "image (16 tokens)",
        ),
        Fixture(
            name="unlimited-ocr",
            model_dir="unlimited-ocr-tiny",
            served_model_name="unlimited-ocr-tiny",
            args=UNLIMITED_OCR_ARGS,
            env={**OCR_ENV, **PURE_TORCHVISION_ENV},
            start_timeout=600.0,
            description="Unlimited-OCR (UnlimitedOCRForCausalLM: tiny LM, dummy weights) with the recipe's "
            "flags: /v1/chat/completions (16 tokens)",
        ),
        Fixture(
            name="deepseek-ocr2",
            model_dir="deepseek-ocr2-tiny",
            served_model_name="deepseek-ocr2-tiny",
            args=DEEPSEEK_OCR2_ARGS,
            env={**OCR_ENV, **PURE_TORCHVISION_ENV},
            start_timeout=600.0,
            description="DeepSeek-OCR-2 (DeepseekOCR2ForCausalLM: tiny LM, real-size vision towers, dummy "
            "weights) with DeepSeek-OCR's recipe flags: /v1/chat/completions (16 tokens)",
        ),
        Fixture(
            name="paddleocr-vl",
            model_dir="paddleocr-vl-tiny",
            served_model_name="PaddleOCR-VL-tiny",
            args=PADDLEOCR_VL_ARGS,
            description="PaddleOCR-VL's architecture (PaddleOCRVLForConditionalGeneration), tiny, seeded, "
            "with the recipe's flags: /v1/chat/completions with an image and a task prompt (16 tokens)",
        ),
        Fixture(
            name="glm-ocr",
            model_dir="glm-ocr-tiny",
            served_model_name="GLM-OCR-tiny",
            args=GLM_OCR_ARGS,
            env=PURE_TORCHVISION_ENV,
            description="GLM-OCR's architecture (GlmOcrForConditionalGeneration), tiny, seeded, on PyPI's "
            "torchvision without its compiled parts: /v1/chat/completions with an image and a task prompt "
            "(16 tokens)",
        ),
        Fixture(
            name="lighton-ocr",
            model_dir="lighton-ocr-tiny",
            served_model_name="LightOnOCR-2-tiny",
            args=LIGHTON_OCR_ARGS,
            env=PURE_TORCHVISION_ENV,
            description="LightOnOCR-2's architecture (LightOnOCRForConditionalGeneration, vLLM's own class "
            "on PyPI's torchvision without its compiled parts), tiny, seeded, with the model card's flags: "
            "/v1/chat/completions with the image alone (16 tokens)",
        ),
    )
}
