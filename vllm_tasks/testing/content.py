"""What the fake server answers: deterministic tokens, vectors, scores, transcripts and OCR output.

Pure functions, no I/O. The same input gives the same output in every process and on every machine
(SHAKE-256 and BLAKE2b digests, never Python's per-process ``hash``).

- **Tokens** are words and punctuation marks (``\\w+|[^\\w\\s]``); a text costs its tokens plus two
  special tokens (``[CLS]``/``[SEP]``), as a BERT-style tokenizer would.
- **Vectors** are bag-of-words hashes: one pseudo-random vector per lower-cased word (from its SHAKE-256
  digest), summed and L2-normalised. The same text always gives the same vector, and texts that share
  words get similar vectors, so a semantic-search test ranks "Paris is the capital of France." above
  "Bananas are yellow." for "capital of France".
- **Scores**: a bi-encoder answers the cosine of the two vectors (-1..1); a cross-encoder answers
  ``sigmoid(8 * cosine - 2)`` (0..1), or the logit itself with ``use_activation: false``; a
  late-interaction model answers MaxSim over per-token vectors (one hashed vector per token, the special
  tokens included): for each query token the best dot product with a document token, summed.
- **Uploads**: audio and images are checked by their file signature only, the way a decoder would refuse
  bytes it cannot open; what they contain is never looked at.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ..grounding import parse_grounding, to_markdown

_WORD_RE = re.compile(r"\w+")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_SENTENCE_RE = re.compile(r"\s*[^.!?]+[.!?]*")
_PIECE_RE = re.compile(r"\s*\S+")
_LOCATE_RE = re.compile(r"<\|ref\|>(.*?)<\|/ref\|>", re.DOTALL)

CLS_ID, SEP_ID = 101, 102
UNK_ID = 100
SPECIAL_TOKENS = {CLS_ID: "[CLS]", SEP_ID: "[SEP]"}
_VOCAB_OFFSET, _VOCAB_SIZE = 1000, 1_000_000
IMAGE_TOKENS = 256
"""Prompt tokens counted for each image (DeepSeek-OCR spends a few hundred)."""

DEFAULT_TRANSCRIPT = " The quick brown fox jumped over the lazy dog. It was not amused."
DEFAULT_OCR_OUTPUT = (
    "<|ref|>title<|/ref|><|det|>[[112, 58, 885, 102]]<|/det|>\n"
    "# Quarterly Report\n\n"
    "<|ref|>text<|/ref|><|det|>[[112, 130, 885, 220]]<|/det|>\n"
    "Revenue grew 12% over the previous quarter.\n\n"
    "<|ref|>table<|/ref|><|det|>[[112, 250, 885, 400]]<|/det|>\n"
    "<table><tr><td>Region</td><td>Revenue</td></tr><tr><td>EU</td><td>500</td></tr></table>\n"
)
"""DeepSeek-OCR-style output for the markdown prompt: three grounded blocks (title, text, table)."""

Box = tuple[int, int, int, int]


# ------------------------------------------------------------------------------------------- tokens


def token_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` character span of each token of ``text``."""
    return [match.span() for match in _TOKEN_RE.finditer(text)]


def token_id(token: str) -> int:
    """The fake vocabulary's id of one token (stable across processes)."""
    digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
    return _VOCAB_OFFSET + int.from_bytes(digest, "little") % _VOCAB_SIZE


def count_tokens(text: str, *, special: bool = True) -> int:
    """How many tokens ``text`` costs (plus ``[CLS]`` and ``[SEP]`` when ``special``).

    Examples:
        >>> count_tokens("hello world")
        4
    """
    return len(token_spans(text)) + (2 if special else 0)


def truncate_tokens(text: str, limit: int, side: str = "right") -> str:
    """``text`` cut to ``limit`` tokens, keeping its spacing: the first ones, or the last with ``"left"``.

    Examples:
        >>> truncate_tokens("one two three", 2)
        'one two'
    """
    spans = token_spans(text)
    if limit >= len(spans):
        return text
    if limit <= 0:
        return ""
    return text[spans[-limit][0] :] if side == "left" else text[: spans[limit - 1][1]]


class Vocabulary:
    """The fake tokenizer with a memory: ids seen in ``/tokenize`` answers map back to their tokens.

    Examples:
        >>> vocabulary = Vocabulary()
        >>> ids = vocabulary.encode("hello world")
        >>> vocabulary.decode(ids)
        'hello world'
    """

    def __init__(self) -> None:
        self._tokens: dict[int, str] = {}
        self._lock = threading.Lock()

    def encode(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text``, framed by ``[CLS]``/``[SEP]`` when ``special``."""
        tokens = [text[start:end] for start, end in token_spans(text)]
        ids = [token_id(token) for token in tokens]
        with self._lock:
            self._tokens.update(zip(ids, tokens, strict=True))
        return [CLS_ID, *ids, SEP_ID] if special else ids

    def strings(self, ids: Iterable[int]) -> list[str]:
        """The token of each id (``[UNK]`` for ids never produced by :meth:`encode`)."""
        return [SPECIAL_TOKENS.get(i) or self._tokens.get(i, "[UNK]") for i in ids]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of token ids (special tokens dropped, tokens joined by spaces)."""
        return " ".join(token for i, token in zip(ids, self.strings(ids), strict=True) if i > SEP_ID)


# ------------------------------------------------------------------------------------ forced aligner

ALIGNER_TOKENS = {
    "<|audio_start|>": 151669,
    "<|audio_end|>": 151670,
    "<|audio_pad|>": 151676,
    "<timestamp>": 151705,
}
"""Qwen3-ForcedAligner's special tokens at their real ids."""
TIMESTAMP_ID = ALIGNER_TOKENS["<timestamp>"]
AUDIO_PAD_ID = ALIGNER_TOKENS["<|audio_pad|>"]
_ALIGNER_RE = re.compile("|".join(re.escape(token) for token in ALIGNER_TOKENS))


def aligner_ids(vocabulary: Vocabulary, text: str) -> list[int]:
    """Token ids of ``text`` for a Qwen3-ForcedAligner tokenizer: its special tokens whole, no [CLS]/[SEP].

    Examples:
        >>> aligner_ids(Vocabulary(), "hi<timestamp>")[1:]
        [151705]
    """
    ids: list[int] = []
    last = 0
    for match in _ALIGNER_RE.finditer(text):
        ids += vocabulary.encode(text[last : match.start()])
        ids.append(ALIGNER_TOKENS[match.group()])
        last = match.end()
    return ids + vocabulary.encode(text[last:])


def audio_token_count(seconds: float) -> int:
    """Tokens Qwen3-ASR's encoder gives for ``seconds`` of audio (vLLM's ``_get_feat_extract_output_lengths``
    on 100 mel frames a second: 13 tokens per full second)."""
    frames = max(1, round(seconds * 100))
    rest = frames % 100
    tail = ((((rest - 1) // 2 + 1) - 1) // 2 + 1 - 1) // 2 + 1 if rest else 0
    return tail + (frames // 100) * 13


def aligner_rows(
    ids: Sequence[int], seconds: float, classes: int, segment_ms: float = 80.0
) -> list[list[float]]:
    """The fake aligner's probabilities: one row of ``classes`` per token. The ``k``-th ``<timestamp>``
    peaks at the class of boundary ``k // 2 + k % 2`` of the words spread evenly over ``seconds`` (a
    word's start, then its end); other rows peak at a class hashed from their id."""
    markers = sum(1 for i in ids if i == TIMESTAMP_ID)
    words = max(1, markers // 2)
    rows = []
    seen = 0
    for token in ids:
        if token == TIMESTAMP_ID:
            boundary = seen // 2 + seen % 2
            peak = min(classes - 1, round(boundary * seconds / words * 1000 / segment_ms))
            seen += 1
        else:
            peak = token % classes
        row = np.full(classes, 0.5 / classes)
        row[peak] += 0.5
        rows.append(row.tolist())
    return rows


# ------------------------------------------------------------------------------------------ vectors


@functools.lru_cache(maxsize=1 << 16)
def _word_vector(word: str, width: int) -> npt.NDArray[np.float64]:
    raw = np.frombuffer(hashlib.shake_256(word.encode()).digest(2 * width), dtype="<u2")
    vector = raw / 32767.5 - 1.0
    vector.setflags(write=False)
    return vector


def raw_vector(text: str, width: int) -> npt.NDArray[np.float64]:
    """The sum of one pseudo-random vector (uniform in [-1, 1)) per lower-cased word of ``text``."""
    total = np.zeros(width)
    for word in _WORD_RE.findall(text.lower()) or [text]:
        total += _word_vector(word, width)
    return total


def text_vector(
    text: str, width: int, *, dimensions: int | None = None, normalize: bool = True
) -> npt.NDArray[np.float32]:
    """The fake embedding of ``text``: float32, ``dimensions`` (Matryoshka) or ``width`` wide.

    Args:
        text: the input's text.
        width: the model's full embedding width.
        dimensions: keep only the first N components (then normalise), as Matryoshka models do.
        normalize: L2-normalise (vLLM's ``use_activation``, default True).

    Examples:
        >>> text_vector("hello", 8).shape
        (8,)
    """
    vector = raw_vector(text, width)[: dimensions or width]
    norm = float(np.linalg.norm(vector))
    if normalize and norm > 0:
        vector = vector / norm
    return vector.astype(np.float32)


def sparse_vector(text: str, width: int) -> npt.NDArray[np.float32]:
    """A SPLADE model's fake vector of ``text``: each lower-cased word weighs on 4 ids hashed from it
    (weights in (0, 3]), max-pooled over the words; every other entry is 0.

    Examples:
        >>> vector = sparse_vector("hello world", 1000)
        >>> int((vector > 0).sum()) <= 8, bool((vector >= 0).all())
        (True, True)
    """
    vector = np.zeros(width, np.float32)
    for word in _WORD_RE.findall(text.lower()) or [text]:
        raw = np.frombuffer(hashlib.shake_256(b"sparse:" + word.encode()).digest(16), dtype="<u4")
        ids = raw[:4] % width
        weights = (raw[:4] % 3000 + 1).astype(np.float32) / 1000.0
        np.maximum.at(vector, ids, weights)
    return vector


def lexical_weights(ids: Sequence[int]) -> list[float]:
    """A BGE-M3 model's fake per-token weights: one per id, hashed from it (0 for about a third of them).

    Examples:
        >>> len(lexical_weights([7592, 2088])), min(lexical_weights(range(1000, 1100))) == 0.0
        (2, True)
    """
    weights = []
    for token in ids:
        raw = int.from_bytes(hashlib.shake_256(b"lexical:%d" % token).digest(4), "little")
        weights.append(0.0 if raw % 3 == 0 else (raw % 1000 + 1) / 400.0)
    return weights


def cosine(first: str, second: str, width: int) -> float:
    """The cosine similarity of two texts' fake embeddings (-1..1)."""
    a = text_vector(first, width).astype(np.float64)
    b = text_vector(second, width).astype(np.float64)
    return float(np.dot(a, b))


def token_vectors(text: str, width: int) -> npt.NDArray[np.float32]:
    """A late-interaction model's per-token embeddings of ``text``.

    Args:
        text: the input's text.
        width: the embedding width.

    Returns:
        One unit vector per token, ``[CLS]`` and ``[SEP]`` included: float32, ``[n_tokens, width]``.

    Examples:
        >>> token_vectors("hello world", 8).shape
        (4, 8)
    """
    tokens = [SPECIAL_TOKENS[CLS_ID], *(text[a:b] for a, b in token_spans(text)), SPECIAL_TOKENS[SEP_ID]]
    return np.stack([text_vector(token, width) for token in tokens])


def maxsim(query: str, document: str, width: int) -> float:
    """The late-interaction score of two texts.

    Args:
        query: the query's text.
        document: the document's text.
        width: the embedding width.

    Returns:
        For each query token, the best dot product with a document token, summed (what
        ``vllm_tasks.maxsim`` gives for their :func:`token_vectors`).
    """
    similarities = token_vectors(query, width).astype(np.float64) @ token_vectors(document, width).T
    return float(similarities.max(axis=1).sum())


def relevance(query: str, document: str, width: int, *, scorer: str, activation: bool = True) -> float:
    """The score of one (query, document) pair for a ``"bi-encoder"``, a ``"cross-encoder"`` or a
    ``"late-interaction"`` model (a ``"listwise"`` one: the document alone in its list).

    Examples:
        >>> relevance("capital of France", "Paris is the capital of France.", 64, scorer="bi-encoder") > 0.5
        True
    """
    if scorer == "late-interaction":
        return maxsim(query, document, width)
    similarity = cosine(query, document, width)
    if scorer == "listwise":
        return 0.9 * similarity
    if scorer == "bi-encoder":
        return similarity
    logit = 8.0 * similarity - 2.0
    return 1.0 / (1.0 + math.exp(-logit)) if activation else logit


def list_relevance(
    query: str, documents: Sequence[str], width: int, *, scorer: str, activation: bool = True
) -> list[float]:
    """The scores of a query's documents scored in one request: per pair (:func:`relevance`), except for a
    ``"listwise"`` model, whose score is each document's cosine less a tenth of the list's mean cosine, so
    that it depends on the whole list (as jina-reranker-v3's does).

    Examples:
        >>> one = list_relevance("cats", ["a cat"], 64, scorer="listwise")
        >>> two = list_relevance("cats", ["a cat", "cats and dogs"], 64, scorer="listwise")
        >>> one[0] != two[0]
        True
    """
    if scorer != "listwise":
        return [relevance(query, doc, width, scorer=scorer, activation=activation) for doc in documents]
    cosines = [cosine(query, doc, width) for doc in documents]
    shift = 0.1 * sum(cosines) / len(cosines) if cosines else 0.0
    return [value - shift for value in cosines]


def class_probabilities(
    text: str, labels: Sequence[str], *, activation: bool = True, multi_label: bool = False
) -> list[float]:
    """Per-label outputs for ``text``: softmax (a sigmoid per label for one label or ``multi_label``), or
    the logits without activation."""
    logits = 4.0 * text_vector(text, max(8, len(labels))).astype(np.float64)[: len(labels)]
    if not activation:
        return [float(x) for x in logits]
    if len(labels) == 1 or multi_label:
        return [1.0 / (1.0 + math.exp(-float(x))) for x in logits]
    exp = np.exp(logits - logits.max())
    return [float(x) for x in exp / exp.sum()]


def token_classifier_files(directory: str | Path, texts: Iterable[str], labels: Sequence[str]) -> Path:
    """Write a tokenizer (``tokenizer.json``) and config (``config.json``, ``id2label``) matching a
    ``FakeVLLM(token_classifier=True, labels=labels)``: its vocabulary holds the tokens of ``texts`` at
    the fake's ids, so ``client.token_classify(texts, tokenizer=directory)`` tokenizes them as the fake's
    ``/tokenize`` does (other words are ``[UNK]``, which the SDK's tokenizer check refuses).

    Returns:
        ``directory`` as a path.

    Examples:
        >>> folder = token_classifier_files(tmp_path, ["Ada lives in Paris"], ("O", "B-PER", "I-PER"))
        >>> client.token_classify(["Ada lives in Paris"], tokenizer=folder).entities
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": UNK_ID, **{token: i for i, token in SPECIAL_TOKENS.items()}}
    for text in texts:
        vocab.update({text[a:b]: token_id(text[a:b]) for a, b in token_spans(text)})
    specials = [
        {"id": i, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for token, i in (("[UNK]", UNK_ID), ("[CLS]", CLS_ID), ("[SEP]", SEP_ID))
    ]  # fmt: skip
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": specials,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Split", "pattern": {"Regex": _TOKEN_RE.pattern}, "behavior": "Isolated",
             "invert": False},
        ]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [i], "tokens": [token]}
                               for i, token in SPECIAL_TOKENS.items()},
        },
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    config = {"architectures": ["BertForTokenClassification"], "id2label": dict(enumerate(labels))}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------- uploads: audio, images

Signature = tuple[int, bytes]
"""A file format's magic bytes and their offset."""

AUDIO_SIGNATURES: tuple[Signature, ...] = (
    (0, b"fLaC"), (0, b"OggS"), (0, b"ID3"), (0, b"\x1a\x45\xdf\xa3"), (4, b"ftyp"), (0, b"#!AMR"),
    (0, b"caff"), (8, b"AIFF"), (8, b"AIFC"),
)  # fmt: skip
"""The audio containers a decoder opens besides WAV: FLAC (when its header gives no duration), Ogg, MP3
with an ID3 tag, WebM/Matroska, MP4/M4A/MOV, AMR, CAF, AIFF."""

IMAGE_SIGNATURES: tuple[Signature, ...] = (
    (0, b"\x89PNG\r\n\x1a\n"), (0, b"\xff\xd8\xff"), (0, b"GIF87a"), (0, b"GIF89a"), (0, b"BM"),
    (0, b"II*\x00"), (0, b"MM\x00*"), (8, b"WEBP"),
)  # fmt: skip
"""The image formats a decoder opens: PNG, JPEG, GIF, BMP, TIFF, WebP."""


def _signed(content: bytes, signatures: Iterable[Signature]) -> bool:
    """Whether ``content`` carries one of ``signatures``."""
    return any(content[offset : offset + len(magic)] == magic for offset, magic in signatures)


def is_image(content: bytes) -> bool:
    """Whether ``content`` starts like an image file PIL would open.

    Args:
        content: the uploaded bytes.

    Returns:
        True when it carries one of :data:`IMAGE_SIGNATURES`.
    """
    return _signed(content, IMAGE_SIGNATURES)


def audio_seconds(content: bytes) -> float | None:
    """The duration of an uploaded audio file, or ``None`` when it is not one vLLM could decode.

    Args:
        content: the uploaded bytes.

    Returns:
        Seconds: from the header of a WAV or FLAC file; for the other containers (:data:`AUDIO_SIGNATURES`,
        or an MPEG/AAC frame header) counted as 16 kHz 16-bit mono PCM (32,000 bytes a second). ``None``
        for anything else (random bytes, a WAV without its ``data`` chunk, an empty file), which vLLM
        refuses.
    """
    if content[:4] == b"RIFF" and content[8:12] == b"WAVE":
        return _wav_seconds(content)
    if content[:4] == b"fLaC" and len(content) >= 26:
        fields = int.from_bytes(content[18:26], "big")  # STREAMINFO: rate (20 bits) ... samples (36)
        rate, samples = fields >> 44, fields & ((1 << 36) - 1)
        if rate and samples:
            return samples / rate
    known = _signed(content, AUDIO_SIGNATURES) or _mpeg_frame(content[:3])
    return len(content) / 32_000 if known else None


def header_sample_rate(content: bytes) -> int | None:
    """The sample rate a WAV or FLAC header gives (the files vLLM decodes with soundfile), else ``None``.

    Args:
        content: the uploaded bytes.

    Returns:
        Hertz, from a WAV ``fmt`` chunk or FLAC's STREAMINFO; ``None`` for other containers.
    """
    if content[:4] == b"RIFF" and content[8:12] == b"WAVE":
        fmt = next((offset for chunk, offset, _ in _wav_chunks(content) if chunk == b"fmt "), None)
        return None if fmt is None else int.from_bytes(content[fmt + 12 : fmt + 16], "little") or None
    if content[:4] == b"fLaC" and len(content) >= 26:
        return (int.from_bytes(content[18:26], "big") >> 44) or None
    return None


def _mpeg_frame(head: bytes) -> bool:
    """Whether ``head`` starts an MPEG audio frame (an MP3 without a tag) or an AAC ADTS frame."""
    if len(head) < 3 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    if head[1] & 0x06 == 0:  # layer bits 00: ADTS (AAC), whose sync word is 12 bits
        return head[1] & 0xF0 == 0xF0
    version_ok = (head[1] >> 3) & 3 != 1  # 01 is reserved
    return version_ok and head[2] >> 4 not in (0, 15) and (head[2] >> 2) & 3 != 3  # bitrate, sample rate


def _wav_chunks(content: bytes) -> Iterator[tuple[bytes, int, int]]:
    """A RIFF/WAVE file's chunks: (name, offset of its header, size), up to the end of the bytes."""
    offset = 12
    while offset + 8 <= len(content):
        size = int.from_bytes(content[offset + 4 : offset + 8], "little")
        yield content[offset : offset + 4], offset, size
        offset += 8 + size + (size & 1)


def _wav_seconds(content: bytes) -> float | None:
    """A RIFF/WAVE file's duration: its ``data`` chunk's size over the ``fmt`` chunk's byte rate."""
    byte_rate, data_size = 0, None
    for chunk, offset, size in _wav_chunks(content):
        if chunk == b"fmt ":
            byte_rate = int.from_bytes(content[offset + 16 : offset + 20], "little")
        elif chunk == b"data":
            data_size = min(size, len(content) - offset - 8)
            break
    return data_size / byte_rate if data_size is not None and byte_rate else None


def segments(text: str, duration: float) -> list[dict[str, Any]]:
    """``verbose_json`` segments: one per sentence, spread over ``duration`` by length."""
    parts = [part for part in _SENTENCE_RE.findall(text) if part.strip()] or [text]
    total = sum(len(part) for part in parts) or 1
    out: list[dict[str, Any]] = []
    start = 0.0
    for index, part in enumerate(parts):
        end = duration if index == len(parts) - 1 else start + duration * len(part) / total
        out.append(
            {"id": index, "avg_logprob": -0.25, "compression_ratio": 1.2, "end": round(end, 3),
             "no_speech_prob": None, "seek": 0, "start": round(start, 3), "temperature": 0.0,
             "text": part, "tokens": [token_id(text[a:b]) for a, b in token_spans(part)]}
        )  # fmt: skip
        start = end
    return out


def stream_pieces(text: str) -> list[str]:
    """The text deltas of a transcription stream: one word each, with its leading space."""
    return _PIECE_RE.findall(text) or [text]


# ---------------------------------------------------------------------------------------------- OCR


def grounding_output(blocks: Iterable[tuple[str, Box | Sequence[Box], str]]) -> str:
    """Write OCR output in DeepSeek-OCR's grounding format, for :class:`FakeVLLM`'s ``ocr_output``.

    Args:
        blocks: ``(label, box or boxes, content)`` per block; boxes are ``(x1, y1, x2, y2)`` on a 0-999
            scale of the image's width and height; labels such as ``title``, ``text``, ``table``.

    Returns:
        ``<|ref|>label<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>`` then the content, per block.

    Examples:
        >>> grounding_output([("title", (0, 0, 999, 100), "# Invoice")])
        '<|ref|>title<|/ref|><|det|>[[0, 0, 999, 100]]<|/det|>\\n# Invoice\\n'
    """
    out = []
    for label, box, content in blocks:
        boxes = [box] if box and isinstance(box[0], int) else box
        det = ", ".join("[" + ", ".join(str(int(v)) for v in cast(Sequence[int], b)) + "]" for b in boxes)
        out.append(f"<|ref|>{label}<|/ref|><|det|>[{det}]<|/det|>\n{content}\n")
    return "\n".join(out)


def ocr_answer(output: str, prompt: str) -> str:
    """What the fake OCR model writes for ``prompt``, given its full grounding ``output``.

    A ``<|grounding|>`` prompt gets ``output`` as is; a locate prompt (``Locate <|ref|>X<|/ref|> ...``)
    gets X with the box of the first block containing it (the whole page if none does); any other
    prompt (``Free OCR.``, ``Describe ...``) gets ``output`` as plain markdown (tags and figures removed).
    """
    target = _LOCATE_RE.search(prompt)
    if prompt.lstrip().startswith("Locate") and target is not None:
        return _locate(output, target.group(1))
    if "<|grounding|>" in prompt:
        return output
    return to_markdown(parse_grounding(output))


def _locate(output: str, text: str) -> str:
    det = "[[0, 0, 999, 999]]"
    for block in output.split("<|ref|>")[1:]:
        found = re.search(r"<\|det\|>(.*?)<\|/det\|>(.*)", block, re.DOTALL)
        if found is not None and text.lower() in found.group(2).lower():
            det = found.group(1)
            break
    return f"<|ref|>{text}<|/ref|><|det|>{det}<|/det|>"


def cut_to_tokens(text: str, limit: int | None) -> tuple[str, int, bool]:
    """``text`` cut after ``limit`` tokens: ``(text, completion tokens, cut)``."""
    spans = token_spans(text)
    if limit is None or len(spans) <= limit:
        return text, len(spans), False
    return text[: spans[limit - 1][1]] if limit > 0 else "", limit, True
