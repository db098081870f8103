"""Does a server's embedding model agree with a local copy of the same model? (``client.verify``).

"vLLM's embeddings differ from sentence-transformers" comes back for every model family: a missing prompt,
another pooling type, normalisation, a shorter context, a lower dtype. ``verify`` embeds a sample of texts
with the server and with a reference (a :class:`ReferenceEmbedder`: by default the model's
sentence-transformers copy on disk, :class:`SentenceTransformerReference`), measures their agreement
(cosine per text, nearest-neighbour overlap) and, where they differ, finds which of those causes explains
it by trying each against the reference. This module holds the comparison; the client methods send.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from .errors import InvalidInputError, MissingDependency
from .views import card, esc, table

AGREE = 0.999
"""The cosine at or above which a server vector and the reference's count as the same vector."""
PRECISION = 0.99
"""Below :data:`AGREE` but at or above this, with no other cause found: the dtype (float16/bfloat16)."""

SAMPLE_TEXTS: tuple[str, ...] = (
    "where do cats live",
    "What is the capital of France?",
    "how to bake sourdough bread at home",
    "Cats live in houses, farms and cities all over the world.",
    "Paris is the capital and largest city of France.",
    "Mix flour, water and a starter, let it rise overnight, then bake it in a hot oven.",
    "The stock market fell sharply on Monday after the central bank raised interest rates.",
    " ".join(["A long passage about rivers, mountains, weather and the people who live near them."] * 6),
)
"""The texts ``verify`` embeds when given none: short queries, documents, and one long passage."""

FindingKind = Literal[
    "prompt", "prompts_not_served", "prompt_differs", "pooling", "normalisation", "truncation", "precision",
    "different_model",
]  # fmt: skip


@runtime_checkable
class ReferenceEmbedder(Protocol):
    """A local implementation of the served model that ``verify`` compares the server with.

    Attributes:
        prompts: the model's named prompts (``{"query": "Instruct: ...", "document": ""}``).
        pooling: the model's own pooling (``"lasttoken"``, ``"mean"``, ``"cls"``, ...).
        normalizes: whether the model's pipeline L2-normalises its vectors.
        max_tokens: the most tokens it reads per text (``None``: no limit known).
    """

    prompts: Mapping[str, str]
    pooling: str
    normalizes: bool
    max_tokens: int | None

    def encode(self, texts: Sequence[str], prompt_name: str | None = None) -> npt.NDArray[Any]:
        """The model's vectors of ``texts`` (with its prompt ``prompt_name``), one row per text."""
        ...

    def pooled(self, texts: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
        """The vectors of ``texts`` under other poolings (``"mean"``, ``"cls"``, ``"lasttoken"``), by name."""
        ...


class SentenceTransformerReference:
    """A sentence-transformers model on this machine as the reference (``vllm-tasks[verify]``).

    Args:
        model: a model directory (the one the server loaded, or a copy), or a loaded ``SentenceTransformer``.

    Raises:
        MissingDependency: sentence-transformers is not installed.

    Examples:
        >>> reference = SentenceTransformerReference("/models/Qwen3-Embedding-0.6B")
        >>> client.verify(reference).agrees
        True
    """

    def __init__(self, model: str | Path | Any) -> None:
        if isinstance(model, str | Path):
            try:
                st = importlib.import_module("sentence_transformers")
                torch = importlib.import_module("torch")
            except ImportError as error:
                raise MissingDependency(
                    "sentence-transformers", "verify", "verify(reference=PATH)"
                ) from error
            model = st.SentenceTransformer(str(model), device="cpu", model_kwargs={"dtype": torch.float32})
        self.model = model
        self.prompts: Mapping[str, str] = dict(getattr(model, "prompts", {}) or {})
        modules = list(model)
        pooling = next((m for m in modules if type(m).__name__ == "Pooling"), None)
        self.pooling = str(getattr(pooling, "pooling_mode", "mean")) if pooling is not None else "mean"
        self.normalizes = any(type(m).__name__ == "Normalize" for m in modules)
        self.max_tokens: int | None = getattr(model, "max_seq_length", None)

    def encode(self, texts: Sequence[str], prompt_name: str | None = None) -> npt.NDArray[Any]:
        """The model's vectors, one text per forward pass (no padding)."""
        vectors = self.model.encode(list(texts), prompt_name=prompt_name, batch_size=1)
        return np.asarray(vectors, dtype=np.float32)

    def pooled(self, texts: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
        """Mean, first-token and last-token pooling of the model's token embeddings."""
        tokens = self.model.encode(list(texts), output_value="token_embeddings", batch_size=1)
        rows = [np.asarray(t.float().cpu().numpy() if hasattr(t, "cpu") else t, np.float32) for t in tokens]
        return {
            "mean": np.stack([row.mean(axis=0) for row in rows]),
            "cls": np.stack([row[0] for row in rows]),
            "lasttoken": np.stack([row[-1] for row in rows]),
        }


def as_reference(reference: ReferenceEmbedder | str | Path) -> ReferenceEmbedder:
    """``reference`` itself, or a :class:`SentenceTransformerReference` of a model directory.

    Raises:
        InvalidInputError: anything else.
    """
    if isinstance(reference, str | Path):
        return SentenceTransformerReference(reference)
    if isinstance(reference, ReferenceEmbedder):
        return reference
    raise InvalidInputError(
        "reference",
        reference,
        "is not a model directory or a ReferenceEmbedder",
        "Pass the path of the model's sentence-transformers copy.",
    )


def sample_texts(texts: Sequence[str] | None) -> list[str]:
    """``texts`` checked (at least two non-empty strings), or :data:`SAMPLE_TEXTS`.

    Raises:
        InvalidInputError: fewer than two texts, or one that is not a non-empty string.
    """
    if texts is None:
        return list(SAMPLE_TEXTS)
    if isinstance(texts, str) or len(texts) < 2:
        raise InvalidInputError("texts", texts, "needs at least two texts", "Pass a list of texts.")
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"texts[{index}]", text, "is not a non-empty string", "Pass texts.")
    return list(texts)


def reference_vectors(value: object, call: str, texts: int, width: int) -> npt.NDArray[np.float64]:
    """What the reference's ``call`` returned, as a float64 ``[texts, width]`` matrix.

    Args:
        value: the returned vectors.
        call: the call, for the error (``"reference.encode(texts)"``).
        texts: how many texts it was given.
        width: the server's vector width.

    Raises:
        InvalidInputError: (``field="reference"``) not a matrix of numbers, another number of rows than
            texts or another width than the server's vectors, or NaN or an infinity: a reference that
            cannot be compared would make any verdict meaningless.

    Examples:
        >>> reference_vectors([[1.0, 0.0], [0.0, 1.0]], "reference.encode(texts)", 2, 2).shape
        (2, 2)
    """
    fix = f"Check the reference: {call} must return one finite vector per text, {width} wide as the server's."
    try:
        matrix = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged rows
        raise InvalidInputError("reference", call, f"returned no matrix ({error})", fix) from None
    if matrix.dtype.kind not in "iuf":
        raise InvalidInputError("reference", call, f"returned {matrix.dtype} values, not numbers", fix)
    if matrix.shape != (texts, width):
        raise InvalidInputError(
            "reference", call, f"returned shape {matrix.shape} for {texts} texts of width {width}", fix
        )
    if not np.isfinite(matrix).all():
        row = int(np.argwhere(~np.isfinite(matrix))[0][0])
        raise InvalidInputError("reference", call, f"returned NaN or an infinity (texts[{row}])", fix)
    return matrix.astype(np.float64)


def reference_poolings(value: object, texts: int, width: int) -> dict[str, npt.NDArray[np.float64]]:
    """What the reference's :meth:`~ReferenceEmbedder.pooled` returned, each pooling checked as by
    :func:`reference_vectors`.

    Raises:
        InvalidInputError: (``field="reference"``) not a mapping of pooling names to vectors, or vectors
            :func:`reference_vectors` refuses.
    """
    call = "reference.pooled(texts)"
    if not isinstance(value, Mapping):
        kind = type(value).__name__
        raise InvalidInputError(
            "reference", call, f"returned a {kind}", "Return {pooling name: vectors}, e.g. {'mean': ...}."
        )
    return {
        str(name): reference_vectors(vectors, f"{call}[{name!r}]", texts, width)
        for name, vectors in value.items()
    }


def cosines(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """The cosine of each row of ``a`` with the same row of ``b``.

    Examples:
        >>> cosines(np.array([[1.0, 0.0]]), np.array([[2.0, 0.0]])).tolist()
        [1.0]
    """
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    out: npt.NDArray[np.float64] = np.sum(a64 * b64, axis=1) / np.where(norms == 0, 1.0, norms)
    return out


def neighbour_overlap(a: npt.NDArray[Any], b: npt.NDArray[Any], k: int = 3) -> float:
    """The share of each text's ``k`` nearest other texts that both sets of vectors agree on (1.0: the same
    neighbours everywhere): how far a search over the server's vectors ranks as the reference's would.

    Examples:
        >>> vectors = np.eye(4)
        >>> neighbour_overlap(vectors, vectors, k=2)
        1.0
    """
    n = a.shape[0]
    k = max(1, min(k, n - 1))

    def neighbours(vectors: npt.NDArray[Any]) -> list[set[int]]:
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
        similarity = unit @ unit.T
        np.fill_diagonal(similarity, -np.inf)
        return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in similarity]

    shared = [len(x & y) for x, y in zip(neighbours(a), neighbours(b), strict=True)]
    return sum(shared) / float(n * k)


class Finding(BaseModel):
    """One cause ``verify`` found, or one piece of advice.

    Attributes:
        kind: ``"pooling"``, ``"normalisation"``, ``"truncation"``, ``"precision"``, ``"prompts_not_served"``
            (the server does not apply the model's named prompts), ``"prompt_differs"``, ``"prompt"`` (advice:
            the model wants a prompt for some texts) or ``"different_model"`` (no cause explains it).
        message: what was measured and what to do.
    """

    model_config = ConfigDict(frozen=True)

    kind: FindingKind
    message: str


class VerifyReport(BaseModel):
    """What :meth:`Client.verify` measured.

    Attributes:
        agrees: the server's vectors equal the reference's (every compared text at cosine >= 0.999) and no
            misconfiguration was found.
        texts: how many texts were compared.
        min_cosine: the lowest cosine of a server vector with the reference's (texts both embedded whole).
        mean_cosine: their mean.
        neighbour_overlap: the share of nearest neighbours (k=3) the two sets of vectors agree on.
        prompts: per named prompt of the model, the lowest cosine of ``embed(prompt_name=...)`` with the
            reference's prompted vectors (``None``: the server refused the prompt name).
        findings: the causes found and advice, most important first.
    """

    model_config = ConfigDict(frozen=True)

    agrees: bool
    texts: int
    min_cosine: float
    mean_cosine: float
    neighbour_overlap: float
    prompts: dict[str, float | None] = {}
    findings: tuple[Finding, ...] = ()

    def __str__(self) -> str:
        head = "agrees with the reference" if self.agrees else "DIFFERS from the reference"
        lines = [
            f"the server {head}: {self.texts} texts, cosine min {self.min_cosine:.6f} "
            f"mean {self.mean_cosine:.6f}, nearest-neighbour overlap {self.neighbour_overlap:.2f}"
        ]
        lines += [f"- {finding.kind}: {finding.message}" for finding in self.findings]
        return "\n".join(lines)

    def to_html(self) -> str:
        """An HTML view for notebooks: the agreement figures and the findings (escaped)."""
        facts = [
            ("agrees", self.agrees),
            ("texts", self.texts),
            ("cosine min / mean", f"{self.min_cosine:.6f} / {self.mean_cosine:.6f}"),
            ("neighbour overlap", f"{self.neighbour_overlap:.2f}"),
        ]
        rows = [(esc(finding.kind), esc(finding.message)) for finding in self.findings]
        columns = (("finding", False), ("what was measured, what to do", False))
        return card(
            "VerifyReport", facts, table(columns, rows, total=len(rows), noun="finding") if rows else ""
        )

    def _repr_html_(self) -> str:
        return self.to_html()


VLLM_POOLING = {"mean": "MEAN", "cls": "CLS", "lasttoken": "LAST"}
"""sentence-transformers pooling modes and vLLM's ``pooling_type`` names for them."""


class PromptCheck(BaseModel):
    """One named prompt of the model, checked: the server's ``embed(prompt_name=...)`` against the
    reference's prompted vectors (``served``: their lowest cosine, ``None`` if refused), and the texts
    embedded without the prompt against the same (``unprompted``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    text: str
    served: float | None
    unprompted: float


def report(
    reference: ReferenceEmbedder,
    served: npt.NDArray[Any],
    expected: npt.NDArray[Any],
    *,
    alternatives: Mapping[str, npt.NDArray[Any]],
    cut: Sequence[int] = (),
    context: int | None = None,
    prompts: Sequence[PromptCheck] = (),
) -> VerifyReport:
    """Compare the server's vectors of the sample with the reference's and name the causes of a difference.

    Args:
        reference: the reference.
        served: the server's vectors, one row per text (texts over its context cut to it).
        expected: the reference's vectors of the same texts.
        alternatives: the reference's vectors of the same texts under other poolings
            (:meth:`ReferenceEmbedder.pooled`).
        cut: the texts the server could not read whole (over its context).
        context: the server's context length.
        prompts: the model's named prompts, checked.

    Returns:
        The :class:`VerifyReport`.
    """
    whole = [i for i in range(len(served)) if i not in set(cut)]
    if not whole:  # every text was over the server's context: nothing read whole to compare
        finding = _truncation(cut, context, reference.max_tokens)
        return VerifyReport(
            agrees=False, texts=len(served), min_cosine=0.0, mean_cosine=0.0, neighbour_overlap=0.0,
            findings=(finding,),
        )  # fmt: skip
    similarity = cosines(served[whole], expected[whole])
    findings: list[Finding] = []
    if cut:
        findings.append(_truncation(cut, context, reference.max_tokens))
    if similarity.min() < AGREE:
        others = {name: vectors[whole] for name, vectors in alternatives.items()}
        findings.append(_direction(reference, served[whole], similarity, [str(i) for i in whole], others))
    findings += _normalisation(reference, served[whole], expected[whole])
    for check in prompts:
        # A prompt is judged only on a server whose plain vectors agree: otherwise their cause explains both.
        findings += _prompt_findings(check, judge_served=bool(similarity.min() >= AGREE))
    causes = [finding for finding in findings if finding.kind != "prompt"]
    return VerifyReport(
        agrees=not causes,
        texts=len(served),
        min_cosine=float(similarity.min()),
        mean_cosine=float(similarity.mean()),
        neighbour_overlap=neighbour_overlap(served[whole], expected[whole]),
        prompts={check.name: check.served for check in prompts},
        findings=tuple(causes + [finding for finding in findings if finding.kind == "prompt"]),
    )


def _truncation(cut: Sequence[int], context: int | None, reads: int | None) -> Finding:
    where = ", ".join(f"texts[{i}]" for i in cut)
    model_reads = f" (the model reads up to {reads})" if reads else ""
    verb = "is" if len(cut) == 1 else "are"
    return Finding(
        kind="truncation",
        message=f"{where} {verb} over the server's context of {context} tokens{model_reads}: vLLM refuses "
        "such texts, or with truncate_prompt_tokens=-1 embeds only their first tokens, other vectors than "
        "the model's. Start vLLM with a larger --max-model-len.",
    )


def _direction(
    reference: ReferenceEmbedder,
    served: npt.NDArray[Any],
    similarity: npt.NDArray[Any],
    names: list[str],
    alternatives: Mapping[str, npt.NDArray[Any]],
) -> Finding:
    """Why the server's vectors point elsewhere: another pooling, a lower dtype, or another model."""
    worst = names[int(np.argmin(similarity))]
    for name, vectors in alternatives.items():
        if name != reference.pooling and cosines(served, vectors).min() >= AGREE:
            return Finding(
                kind="pooling",
                message=f"the server pools with {VLLM_POOLING.get(name, name)} where the model's "
                f"sentence-transformers config says {VLLM_POOLING.get(reference.pooling, reference.pooling)} "
                f"(cosine {similarity.min():.4f} as served, >= {AGREE} under {name} pooling): start vLLM "
                "without a pooling_type in --pooler-config, or with "
                f'\'{{"pooling_type": "{VLLM_POOLING.get(reference.pooling, reference.pooling)}"}}\'.',
            )
    if similarity.min() >= PRECISION:
        return Finding(
            kind="precision",
            message=f"cosine {similarity.min():.4f} at worst (texts[{worst}]): the same model in a lower "
            "precision (--dtype float16/bfloat16, or a quantised checkpoint): rankings agree, exact values "
            "do not.",
        )
    return Finding(
        kind="different_model",
        message=f"cosine {similarity.min():.4f} at worst (texts[{worst}]) and no pooling, precision or "
        "prompt explains it: the server runs other weights (another checkpoint or revision, custom code it "
        "does not run, or an adapter it did not merge).",
    )


def _normalisation(
    reference: ReferenceEmbedder, served: npt.NDArray[Any], expected: npt.NDArray[Any]
) -> list[Finding]:
    norms = np.linalg.norm(served.astype(np.float64), axis=1)
    unit = bool(np.all(np.abs(norms - 1.0) <= 1e-3))
    if reference.normalizes and not unit:
        return [
            Finding(
                kind="normalisation",
                message="the server's vectors are not unit length "
                f"(norms {norms.min():.3g}..{norms.max():.3g}) while the model normalises them: vLLM was "
                "started with use_activation false in --pooler-config (or the call passed "
                "use_activation=False): dot products and score thresholds differ, directions do not.",
            )
        ]
    reference_norms = np.linalg.norm(expected.astype(np.float64), axis=1)
    if not reference.normalizes and unit and not np.all(np.abs(reference_norms - 1.0) <= 1e-3):
        return [
            Finding(
                kind="normalisation",
                message="the server normalises its vectors while the model does not (vLLM's default): pass "
                "use_activation=False for the model's raw vectors: dot products differ, directions do not.",
            )
        ]
    return []


def _prompt_findings(check: PromptCheck, *, judge_served: bool) -> list[Finding]:
    findings = []
    if check.served is None:
        findings.append(
            Finding(
                kind="prompts_not_served",
                message=f"the server does not apply the model's prompt {check.name!r} (embed(prompt_name="
                f"{check.name!r}) was refused: its model directory has no config_sentence_transformers.json "
                f"prompts, or its vLLM predates them): pass prompt={check.text!r} instead.",
            )
        )
    elif check.served < AGREE and judge_served:
        findings.append(
            Finding(
                kind="prompt_differs",
                message=f"the server's prompt {check.name!r} gives other vectors than the model's (cosine "
                f"{check.served:.4f}): its prompt text differs from {check.text!r}; pass prompt= with "
                "the text.",
            )
        )
    if check.unprompted < AGREE:
        findings.append(
            Finding(
                kind="prompt",
                message=f"texts embedded without the model's {check.name!r} prompt have cosine "
                f"{check.unprompted:.3f} with its {check.name} vectors: embed {check.name} texts with "
                f"prompt_name={check.name!r} (or prompt={check.text!r}).",
            )
        )
    return findings
