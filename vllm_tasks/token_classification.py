"""``token_classify`` (``/pooling``, task ``token_classify``), the pure parts: entity spans from per-token
scores, as transformers' ``pipeline("token-classification", aggregation_strategy=...)`` makes them.

The texts are tokenized here, with the model's own fast tokenizer (its ``tokenizer.json``, read by the
``tokenizers`` package): its offsets map every token to characters of the caller's text, also where the
tokenizer lower-cases, strips accents or splits words, which the server's ``/tokenize`` (token ids and
token strings, no offsets) cannot give exactly. The token ids go to the server as they are, so its
per-token logits are those of exactly these tokens; one ``/tokenize`` of the first text checks that the
local tokenizer is the server's. The aggregation is transformers' ``TokenClassificationPipeline``
(``gather_pre_entities``, ``aggregate``, ``aggregate_words``, ``group_entities``; transformers 5.19),
step for step. The sending is ``vllm_tasks/_async/pooling.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .calls import TaskParams
from .dependencies import require
from .errors import InvalidInputError, UnexpectedResponse
from .types.scoring import PoolingResult, TokenClassificationResult, TokenEntity

Aggregation = Literal["simple", "first", "average", "max"]
"""How token labels become entities: transformers' ``aggregation_strategy`` names (None: one per token)."""
AGGREGATIONS: tuple[str, ...] = ("simple", "first", "average", "max")

_TOKENIZER_FIX = (
    "Pass tokenizer= the model's directory (with tokenizer.json and config.json) or its tokenizer.json, "
    "e.g. from `huggingface-cli download MODEL tokenizer.json config.json`."
)


@dataclass(frozen=True)
class TokenClassifyParams(TaskParams):
    """The options of ``token_classify``, checked on construction; each field is its keyword argument of
    the same name (see :meth:`~vllm_tasks.Client.token_classify`).

    Raises:
        InvalidInputError: an unknown ``aggregation``, or ``ignore_labels``/``label_names`` that are not
            lists of strings (``label_names`` non-empty).

    Examples:
        >>> from vllm_tasks.token_classification import TokenClassifyParams
        >>> params = TokenClassifyParams(aggregation="first")
        >>> client.token_classify(["Ada lives in Paris"], **params.keywords()).entities[0][0].label
        'PER'
    """

    aggregation: Aggregation | None = "simple"
    ignore_labels: tuple[str, ...] = ("O",)
    label_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.aggregation is not None and self.aggregation not in AGGREGATIONS:
            raise InvalidInputError(
                "aggregation",
                self.aggregation,
                f"must be one of {', '.join(AGGREGATIONS)} or None",
                "None gives one entity per token.",
            )
        object.__setattr__(self, "ignore_labels", _names("ignore_labels", self.ignore_labels, empty=True))
        if self.label_names is not None:
            object.__setattr__(self, "label_names", _names("label_names", self.label_names, empty=False))


def _names(field_name: str, value: object, *, empty: bool) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or (not value and not empty):
        raise InvalidInputError(
            field_name, type(value).__name__, "must be a list of label names", "E.g. ('O',)."
        )
    for index, name in enumerate(value):
        if not isinstance(name, str):
            raise InvalidInputError(f"{field_name}[{index}]", type(name).__name__, "must be a string", "")
    return tuple(value)


def token_texts(value: Any) -> list[str]:
    """Check ``token_classify``'s input: a string or a non-empty list of strings.

    Raises:
        InvalidInputError: anything else, naming the element.

    Examples:
        >>> token_texts("Ada lives in Paris")
        ['Ada lives in Paris']
    """
    texts = [value] if isinstance(value, str) else value
    if isinstance(texts, bytes | bytearray) or not isinstance(texts, Sequence) or not texts:
        raise InvalidInputError(
            "texts", type(value).__name__, "must be a string or a non-empty list of them", ""
        )
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInputError(f"texts[{index}]", type(text).__name__, "must be a string", "")
    return list(texts)


@dataclass(frozen=True)
class LocalTokenizer:
    """The model's fast tokenizer (padding and truncation off, as the pipeline calls it) and its labels."""

    tokenizer: Any
    label_names: tuple[str, ...] | None
    subword_prefix: str | None = field(default=None)
    unk_id: int | None = field(default=None)

    def encode(self, text: str) -> Any:
        """The ``tokenizers.Encoding`` of ``text`` with the model's special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=True)


def load_tokenizer(source: Any, root: str | None) -> LocalTokenizer:
    """The model's fast tokenizer and label names from ``source``: a directory holding ``tokenizer.json``
    (and ``config.json``, whose ``id2label`` names the labels), a ``tokenizer.json`` path, a
    ``tokenizers.Tokenizer`` or a transformers fast tokenizer; None: the served model's ``root`` (from
    ``/v1/models``) where it is a directory on this machine.

    Raises:
        InvalidInputError: no tokenizer found, or one that cannot be read.
        MissingDependency: ``tokenizers`` is not installed (``vllm-tasks[tokenizer]``).
    """
    tokenizers = require("tokenizers", "tokenizer", "token classification offsets")
    if source is None:
        if root is None or not (Path(root) / "tokenizer.json").is_file():
            raise InvalidInputError(
                "tokenizer", root, "is not a directory with tokenizer.json on this machine", _TOKENIZER_FIX
            )
        source = root
    if isinstance(source, str | Path):
        path = Path(source)
        file = path / "tokenizer.json" if path.is_dir() else path
        config = file.with_name("config.json")
        return _tokenizer_file(str(file), str(config), _file_stamp(file), _file_stamp(config))
    backend = getattr(source, "backend_tokenizer", source)
    if not isinstance(backend, tokenizers.Tokenizer):
        raise InvalidInputError("tokenizer", type(source).__name__, "is not a fast tokenizer", _TOKENIZER_FIX)
    # a copy: the caller's keeps its padding and truncation
    return _local_tokenizer(tokenizers.Tokenizer.from_str(backend.to_str()), None)


def _file_stamp(path: Path) -> tuple[int, int] | None:
    """What tells a changed file from the one read before: its modification time and size."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=16)
def _tokenizer_file(file: str, config: str, *stamps: tuple[int, int] | None) -> LocalTokenizer:
    """A ``tokenizer.json`` and its ``config.json``'s labels, read once per version of the files
    (``stamps``): a call does not parse the tokenizer again."""
    tokenizers = require("tokenizers", "tokenizer", "token classification offsets")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(file)
    except Exception as error:  # the Rust library's own exception types
        raise InvalidInputError("tokenizer", file, f"cannot be read ({error})", _TOKENIZER_FIX) from None
    return _local_tokenizer(tokenizer, _config_labels(Path(config)))


def _local_tokenizer(tokenizer: Any, labels: tuple[str, ...] | None) -> LocalTokenizer:
    tokenizer.no_padding()
    tokenizer.no_truncation()
    prefix = getattr(tokenizer.model, "continuing_subword_prefix", None)
    unk_token = getattr(tokenizer.model, "unk_token", None)
    unk_id = tokenizer.token_to_id(unk_token) if isinstance(unk_token, str) else None
    return LocalTokenizer(tokenizer, labels, prefix or None, unk_id)


def _config_labels(path: Path) -> tuple[str, ...] | None:
    """``id2label`` of a transformers ``config.json`` in class order (``LABEL_i`` where it has none, as
    transformers names them); None without the file."""
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        id2label = {int(key): str(value) for key, value in (config.get("id2label") or {}).items()}
        count = max(id2label, default=-1) + 1 or int(config.get("num_labels", 2))
    except (ValueError, TypeError, AttributeError) as error:
        raise InvalidInputError(
            "tokenizer", str(path), f"has a config.json that cannot be read ({error})", ""
        ) from None
    return tuple(id2label.get(i, f"LABEL_{i}") for i in range(count))


def label_names(local: LocalTokenizer, params: TokenClassifyParams, count: int) -> tuple[str, ...]:
    """The names of the model's ``count`` labels: ``params.label_names``, else the tokenizer's config's.

    Raises:
        InvalidInputError: none known, or not ``count`` of them.
    """
    names = params.label_names or local.label_names
    if names is None:
        raise InvalidInputError(
            "label_names", None, "are needed: no config.json beside the tokenizer names the labels",
            "Pass label_names= in class order (the model's id2label).",
        )  # fmt: skip
    if len(names) != count:
        raise InvalidInputError(
            "label_names", f"{len(names)} names", f"must name each of the model's {count} labels",
            "Pass the model's id2label names in class order.",
        )  # fmt: skip
    return names


def softmax(logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Each row's softmax, computed as the pipeline does (in the logits' dtype, max subtracted first).

    Examples:
        >>> softmax(np.array([[0.0, 0.0]], np.float32)).tolist()
        [[0.5, 0.5]]
    """
    shifted = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    scores: npt.NDArray[np.float32] = shifted / shifted.sum(axis=-1, keepdims=True)
    return scores


def entities(
    text: str,
    encoding: Any,
    logits: npt.NDArray[np.float32],
    local: LocalTokenizer,
    *,
    names: Sequence[str],
    params: TokenClassifyParams,
) -> list[TokenEntity]:
    """The entities of one text from its encoding and the server's per-token logits.

    Raises:
        UnexpectedResponse: not one row of ``len(names)`` logits per token (``kind="decode"``).
    """
    if logits.ndim != 2 or logits.shape != (len(encoding.ids), len(names)):
        raise UnexpectedResponse(
            f"/pooling: token_classify answered logits of shape {logits.shape} for {len(encoding.ids)} "
            f"tokens and {len(names)} labels",
            kind="decode",
        )
    scores = softmax(logits.astype(np.float32, copy=False))
    pre = _pre_entities(text, encoding, scores, local, params.aggregation)
    if params.aggregation is None or params.aggregation == "simple":
        tokens = [_token_entity(text, item, names) for item in pre]
    else:
        tokens = _aggregate_words(text, pre, names, params.aggregation)
    grouped = tokens if params.aggregation is None else _group_entities(text, tokens)
    return [entity for entity in grouped if entity.label not in params.ignore_labels]


@dataclass(frozen=True)
class _PreEntity:
    scores: npt.NDArray[np.float32]
    start: int
    end: int
    index: int
    is_subword: bool


def _pre_entities(
    text: str, encoding: Any, scores: npt.NDArray[np.float32], local: LocalTokenizer, aggregation: str | None
) -> list[_PreEntity]:
    """The pipeline's ``gather_pre_entities``: non-special tokens with their offsets and whether each
    continues a word (a WordPiece-style tokenizer: the token's text is longer than its span, ``##ing``;
    others: the pipeline's fallback, no space before it)."""
    found = []
    for index, (token_id, token, special, (start, end)) in enumerate(
        zip(encoding.ids, encoding.tokens, encoding.special_tokens_mask, encoding.offsets, strict=True)
    ):
        if special:
            continue
        if local.subword_prefix is not None:
            is_subword = len(token) != end - start
        else:
            is_subword = start > 0 and " " not in text[start - 1 : start + 1]
        if token_id == local.unk_id:
            is_subword = False
        found.append(_PreEntity(scores[index], start, end, index, is_subword))
    return found


def _token_entity(text: str, item: _PreEntity, names: Sequence[str]) -> TokenEntity:
    best = int(item.scores.argmax())
    return TokenEntity(
        label=names[best],
        score=float(item.scores[best]),
        start=item.start,
        end=item.end,
        text=text[item.start : item.end],
        index=item.index,
    )


def _aggregate_words(
    text: str, pre: list[_PreEntity], names: Sequence[str], aggregation: str
) -> list[TokenEntity]:
    """The pipeline's ``aggregate_words``: each word (a token and the subword tokens after it) gets one
    label, from its first token (``first``), its most confident token (``max``) or its tokens' mean
    scores (``average``)."""
    words: list[list[_PreEntity]] = []
    for item in pre:
        if words and item.is_subword:
            words[-1].append(item)
        else:
            words.append([item])
    found = []
    for word in words:
        if aggregation == "first":
            scores = word[0].scores
        elif aggregation == "max":
            scores = max(word, key=lambda item: item.scores.max()).scores
        else:
            scores = np.nanmean(np.stack([item.scores for item in word]), axis=0)
        best = int(scores.argmax())
        start, end = word[0].start, word[-1].end
        found.append(
            TokenEntity(
                label=names[best], score=float(scores[best]), start=start, end=end, text=text[start:end]
            )
        )
    return found


def _tag(label: str) -> tuple[str, str]:
    """The pipeline's ``get_tag``: (``B`` or ``I``, the entity type); a label without a prefix is ``I``."""
    if label.startswith("B-"):
        return "B", label[2:]
    if label.startswith("I-"):
        return "I", label[2:]
    return "I", label


def _group_entities(text: str, tokens: list[TokenEntity]) -> list[TokenEntity]:
    """The pipeline's ``group_entities``: adjacent tokens (or words) of one entity type join unless the
    next is a ``B-``; a group is named by its type and scored by its members' mean score."""
    groups: list[list[TokenEntity]] = []
    for entity in tokens:
        if groups:
            bi, tag = _tag(entity.label)
            if tag == _tag(groups[-1][-1].label)[1] and bi != "B":
                groups[-1].append(entity)
                continue
        groups.append([entity])
    found = []
    for group in groups:
        start, end = group[0].start, group[-1].end
        found.append(
            TokenEntity(
                label=group[0].label.split("-", 1)[-1],
                score=float(np.nanmean([entity.score for entity in group])),
                start=start,
                end=end,
                text=text[start:end],
            )
        )
    return found


def check_server_tokens(local_ids: Sequence[int], server_ids: Sequence[int]) -> None:
    """Check that the local tokenizer gives the server's token ids for the same text.

    Raises:
        InvalidInputError: other ids (another model's tokenizer), naming the first that differs.

    Examples:
        >>> check_server_tokens([101, 7592, 102], [101, 7592, 102])
    """
    if list(local_ids) != list(server_ids):
        at = next(
            (i for i, (a, b) in enumerate(zip(local_ids, server_ids, strict=False)) if a != b),
            min(len(local_ids), len(server_ids)),
        )
        raise InvalidInputError(
            "tokenizer",
            f"token {at} of texts[0]",
            "differs from the server's tokenizer (its /tokenize)",
            "Pass the served model's own tokenizer.json.",
        )


def token_classification(
    texts: Sequence[str],
    encodings: Sequence[Any],
    pooled: PoolingResult,
    local: LocalTokenizer,
    params: TokenClassifyParams,
) -> TokenClassificationResult:
    """The entities of every text from the ``/pooling`` answer of their token ids.

    Raises:
        InvalidInputError: label names that are missing or of another count than the model's labels.
        UnexpectedResponse: an answer that is not one row of label logits per token.
    """
    if len(pooled.data) != len(texts) or any(array.ndim != 2 for array in pooled.data):
        shapes = [array.shape for array in pooled.data][:5]
        raise UnexpectedResponse(
            f"/pooling: token_classify answered arrays of shapes {shapes} for {len(texts)} texts; each "
            "text has one row of label logits per token",
            kind="decode",
        )
    names = label_names(local, params, pooled.data[0].shape[1])
    found = [
        entities(text, encoding, logits, local, names=names, params=params)
        for text, encoding, logits in zip(texts, encodings, pooled.data, strict=True)
    ]
    return TokenClassificationResult(
        entities=found, aggregation=params.aggregation, model=pooled.model, usage=pooled.usage
    )
