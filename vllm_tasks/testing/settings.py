"""What a :class:`~vllm_tasks.testing.FakeVLLM` pretends to be: model, version, tasks, outputs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..errors import InvalidInputError
from ..ocr.presets import OCRPreset, preset_named
from ..tasks import TASK_ROUTES, TaskName
from ..validation import positive_int
from .content import DEFAULT_OCR_OUTPUT, DEFAULT_TRANSCRIPT
from .wire import ReceivedRequest

Scorer = Literal["bi-encoder", "cross-encoder", "late-interaction", "listwise"]
TextSource = str | Callable[[ReceivedRequest], str]
"""A fixed text, or a function of the request that answers it."""

ALL_TASKS: frozenset[str] = frozenset(TASK_ROUTES) | {"realtime"}
"""Every task the SDK knows (a hybrid no real vLLM serves at once: one fake for a whole app); ``realtime``
is the WebSocket route ``/v1/realtime``."""
EMBEDDING_TASKS: frozenset[TaskName] = frozenset({"embed", "embed_v2", "score", "rerank", "pooling"})
"""What an embedding model (``vllm serve BAAI/bge-m3 --runner pooling``) serves: a bi-encoder."""
RERANKER_TASKS: frozenset[TaskName] = frozenset({"score", "rerank", "classify", "pooling"})
"""What a cross-encoder (``vllm serve BAAI/bge-reranker-v2-m3``) serves."""
LISTWISE_TASKS: frozenset[TaskName] = frozenset({"score", "rerank", "pooling"})
"""What a listwise reranker (``vllm serve jinaai/jina-reranker-v3 --runner pooling``) serves; use it with
``scorer="listwise"``."""
SPEECH_TASKS: frozenset[TaskName] = frozenset({"transcription", "translation"})
"""What Whisper serves."""
REALTIME_TASKS: frozenset[str] = frozenset({"transcription", "realtime"})
"""What a realtime speech model serves (Qwen3-ASR as ``Qwen3ASRRealtimeGeneration``, Voxtral Realtime):
``/v1/audio/transcriptions`` and the WebSocket route ``/v1/realtime``."""
OCR_TASKS: frozenset[TaskName] = frozenset({"chat"})
"""What an OCR model (DeepSeek-OCR, PaddleOCR-VL, ...) serves: chat completions."""


@dataclass
class FakeSettings:
    """The fake server's configuration; change a field while it runs and the next request sees it.

    Attributes:
        model: the served model name (``/v1/models``); requests naming another model get vLLM's 404.
        tasks: the tasks served (``vllm_tasks.tasks.TaskName``: embed, embed_v2, score, rerank,
            classify, pooling, transcription, translation, chat; and realtime, the WebSocket
            ``/v1/realtime``); other task routes answer 404 ``{"detail": "Not Found"}`` as vLLM does (403 to
            a WebSocket handshake). Presets: ``ALL_TASKS`` (default), ``EMBEDDING_TASKS``,
            ``RERANKER_TASKS``, ``SPEECH_TASKS``, ``REALTIME_TASKS``, ``OCR_TASKS``.
        version: what ``GET /version`` answers (the SDK gates features on it).
        width: the embedding width.
        max_model_len: the context length; longer inputs get vLLM's context-length 400.
        matryoshka: ``True`` accepts any ``dimensions`` from 1 to ``width``, a list accepts only those,
            ``False`` refuses ``dimensions`` as a non-Matryoshka model does.
        scorer: ``"bi-encoder"`` (cosine scores), ``"cross-encoder"`` (sigmoid scores),
            ``"late-interaction"`` (a ColBERT-style ``token_embed`` model: MaxSim scores, per-token vectors
            from ``/pooling``, 501 from ``/v1/embeddings`` and ``/v2/embed``; from ``version`` 0.33.0 vLLM's
            per-token ``/v1/embeddings``, float only, and a 404 from ``/v2/embed``) or ``"listwise"``
            (jina-reranker-v3: one prompt per list, so a score depends on the whole list; ``/pooling``
            refuses one input and answers a list with one matrix); default: cross-encoder when
            ``classify`` is served, else bi-encoder.
        sparse: a SPLADE model: ``/v1/embeddings`` answers ``width``-wide (vocabulary-wide) rows of
            non-negative weights, mostly zeros and not normalised (what ``embed_sparse`` reads).
        lexical: BGE-M3 served with ``token_classify`` active: ``/pooling`` answers one weight per token
            ([CLS]/[SEP] rows left out), ``/v1/embeddings`` and ``/v2/embed`` answer 501.
        aligner: Qwen3-ForcedAligner served with ``token_classify`` active (``client.align``): ``/pooling``
            reads one conversation holding the aligner's prompt and an audio part and answers a row of
            ``width`` time-class probabilities per prompt token (audio tokens included; the ``k``-th
            ``<timestamp>``'s argmax puts the words evenly over the audio, at 80 ms per class);
            ``/tokenize`` keeps the aligner's markers as one token each.
        labels: the classifier's labels (``/classify``).
        input_types: the ``/v2/embed`` ``input_type`` values accepted (others get vLLM's 400).
        transcript: the text every transcription and translation answers (or a function of the request).
        language: the language ``verbose_json`` reports when the request names none.
        segments: whether the speech model gives timed segments (Whisper); False answers ``verbose_json``
            with vLLM's 400, as a Voxtral or Qwen3-ASR server does.
        ocr_output: the OCR model's page (or a function of the request): DeepSeek-OCR's grounded output
            (build one with :func:`grounding_output`), answered per prompt as DeepSeek-OCR does; for a
            preset of another format, grounded output is answered as its markdown and any other text as
            is (write it in the preset's format: olmOCR's front matter, dots.ocr's JSON, ...).
        ocr_preset: the OCR model the chat route answers as (a name in
            ``vllm_tasks.ocr.presets.PRESETS`` or an ``OCRPreset``): a request with an image whose
            message is not shaped as that model takes it (image and text order, the image alone, the
            literal ``<image>``) is answered 400, naming the difference -- vLLM itself would answer, with
            output of no use. Name ``model`` (or ``root``) so that the SDK recognises the preset.
        ngram_processor: whether DeepSeek-OCR's n-gram logits processor is "loaded" (it refuses
            ``vllm_xargs.ngram_size`` 0, the SDK's check); False ignores ``vllm_xargs``. Only for a preset
            with the n-gram guard (another model's server has no such processor).
        score_template: False makes the cross-encoder read each pair as the bare concatenation of query and
            document, as an LLM reranker (Qwen3-Reranker) started without ``--chat-template`` does:
            ``/score`` and ``/rerank`` count the joined text's tokens, no special tokens (the SDK's check).
        api_key: when set, ``/v1`` and ``/v2`` routes need ``Authorization: Bearer <key>`` (401 else).
        openapi: False answers 404 to ``/openapi.json`` (a server started with ``--disable-fastapi-docs``).
        healthy: False makes ``/health`` answer 503 (a server still loading).
        latency: seconds added to every answer.
        root: the model card's ``root`` (default: ``model``).
    """

    model: str = "fake-model"
    tasks: frozenset[str] = ALL_TASKS
    version: str = "0.32.0"
    width: int = 384
    max_model_len: int = 512
    matryoshka: bool | Sequence[int] = True
    scorer: Scorer | None = None
    sparse: bool = False
    lexical: bool = False
    aligner: bool = False
    labels: Sequence[str] = ("negative", "positive")
    input_types: Sequence[str] = ()
    transcript: TextSource = DEFAULT_TRANSCRIPT
    language: str = "en"
    segments: bool = True
    ocr_output: TextSource = DEFAULT_OCR_OUTPUT
    ocr_preset: str | OCRPreset = "deepseek-ocr"
    ngram_processor: bool = True
    score_template: bool = True
    api_key: str | None = None
    openapi: bool = True
    healthy: bool = True
    latency: float = 0.0
    root: str | None = None
    created: int = field(default=1_800_000_000, repr=False)

    def __post_init__(self) -> None:
        self.tasks = checked_tasks(self.tasks)
        preset_named(self.ocr_preset)
        positive_int("width", self.width)
        positive_int("max_model_len", self.max_model_len)
        if not self.labels:
            raise InvalidInputError(
                "labels", self.labels, "must name at least one label", "E.g. ('no', 'yes')."
            )
        if self.scorer is not None and self.scorer not in get_args(Scorer):
            kinds = ", ".join(repr(kind) for kind in get_args(Scorer))
            raise InvalidInputError("scorer", self.scorer, "is not a scorer kind", f"Use one of {kinds}.")

    @property
    def preset(self) -> OCRPreset:
        """The OCR preset the chat route answers as."""
        return preset_named(self.ocr_preset)

    @property
    def scorer_kind(self) -> Scorer:
        """``scorer``, or the default: cross-encoder when ``classify`` is served, else bi-encoder."""
        if self.scorer is not None:
            return self.scorer
        return "cross-encoder" if "classify" in self.tasks else "bi-encoder"

    def text_of(self, source: TextSource, request: ReceivedRequest) -> str:
        """The text a :data:`TextSource` gives for ``request``."""
        return source(request) if callable(source) else source


def checked_tasks(tasks: Iterable[str]) -> frozenset[str]:
    """``tasks`` as a frozenset, every name checked against the SDK's task names.

    Raises:
        InvalidInputError: a name that is not a task (or a single string instead of a collection).
    """
    if isinstance(tasks, str):
        raise InvalidInputError("tasks", tasks, "must be a collection of task names", f"E.g. {{'{tasks}'}}.")
    names = frozenset(tasks)
    unknown = sorted(names - ALL_TASKS)
    if unknown:
        raise InvalidInputError(
            "tasks", unknown, "are not task names", f"Use some of {', '.join(sorted(ALL_TASKS))}."
        )
    return names
