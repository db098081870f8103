"""Models describing a server: what ``/version``, ``/v1/models`` and ``/openapi.json`` said, and probes."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from .. import defaults
from ..redaction import redact_url
from ..versions import ServerVersion
from ..views import card, clip, esc, note, table


class ModelCard(BaseModel):
    """One entry of ``GET /v1/models``: a served model name (or LoRA adapter)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: str
    """The served model name (what requests send as ``model``)."""
    root: str | None = None
    """The model path or Hugging Face id the server loaded (adapter path for LoRA cards)."""
    parent: str | None = None
    """The base model's name, for LoRA cards."""
    max_model_len: int | None = None
    """The context length; ``None`` on LoRA cards."""


class ServerInfo(BaseModel):
    """What a client learned about its server; read once per client and cached.

    Examples:
        >>> info = client.server_info()
        >>> info.version, info.default_model, info.max_model_len
        ('0.32.0', 'minilm', 256)
    """

    model_config = ConfigDict(frozen=True)

    base_url: str
    """The server's root URL, without credentials (shown in reports and ``vllm-tasks probe``)."""
    version: str | None
    """The raw ``GET /version`` string, or ``None`` when the server (or a proxy) hides it."""
    models: tuple[ModelCard, ...]
    routes: frozenset[str] | None
    """Paths in ``/openapi.json`` (routes are mounted per task), or ``None`` when docs are disabled."""

    @field_validator("base_url")
    @classmethod
    def _without_credentials(cls, value: str) -> str:
        return redact_url(value)

    @property
    def parsed_version(self) -> ServerVersion:
        """The version, parsed; ``known`` is False when it was hidden or unparseable."""
        return ServerVersion.parse(self.version or "unknown")

    @property
    def default_model(self) -> str | None:
        """The first served name, which vLLM uses when a request names no model."""
        base = [entry for entry in self.models if entry.parent is None]
        cards = base or list(self.models)
        return cards[0].id if cards else None

    @property
    def max_model_len(self) -> int | None:
        """The default model's context length, when the server states it."""
        return self.model_card(None).max_model_len if self.models else None

    def model_card(self, model: str | None) -> ModelCard:
        """The card for ``model`` (the default model when ``None``).

        Raises:
            KeyError: when the server does not serve that name.
        """
        name = model or self.default_model
        for entry in self.models:
            if entry.id == name:
                return entry
        raise KeyError(name)

    def serves_route(self, path: str) -> bool | None:
        """Whether ``/openapi.json`` lists ``path``; ``None`` when the schema is unavailable."""
        return None if self.routes is None else path in self.routes


class TaskStatus(StrEnum):
    """How a server answered a task's probe request."""

    SERVED = "served"
    NOT_SERVED = "not_served"
    """404: the route is not mounted; the model lacks the task."""
    INACTIVE = "inactive"
    """501: the route is mounted but the model's active pooling task is another one."""
    UNAUTHORIZED = "unauthorized"
    """401: the route is guarded by an API key the client does not have (or has wrong)."""
    ERROR = "error"
    """Anything else (5xx, timeouts): see ``detail``."""


class TaskProbe(BaseModel):
    """One task's probe outcome."""

    model_config = ConfigDict(frozen=True)

    task: str
    path: str
    status: TaskStatus
    http_status: int | None = None
    detail: str | None = None


class Advisory(BaseModel):
    """A known server pitfall that applies to this server's version and model."""

    model_config = ConfigDict(frozen=True)

    id: str
    message: str
    reference: str | None = None


class ProbeReport(BaseModel):
    """What :meth:`Client.probe` found: the server, each task's status, and advisories."""

    model_config = ConfigDict(frozen=True)

    server: ServerInfo
    tasks: tuple[TaskProbe, ...]
    advisories: tuple[Advisory, ...]
    ngram_processor: bool | None = None
    """For a DeepSeek-OCR server: whether its n-gram logits processor is loaded (None: not checked)."""
    score_template_missing: bool | None = None
    """For a cross-encoder: whether it reads pairs without a score template (True: an LLM reranker such as
    Qwen3-Reranker started without ``--chat-template``; None: not checked or inconclusive)."""

    def status(self, task: str) -> TaskStatus:
        """The status of ``task`` (e.g. ``"embed"``).

        Raises:
            KeyError: for a task name that was not probed.
        """
        for probe in self.tasks:
            if probe.task == task:
                return probe.status
        raise KeyError(task)

    @property
    def served_tasks(self) -> list[str]:
        """Names of the tasks the server serves."""
        return [probe.task for probe in self.tasks if probe.status is TaskStatus.SERVED]

    def to_html(self) -> str:
        """An HTML view for notebooks: the server, the served-task table (status, HTTP code, detail), the
        models and the advisories (all escaped).

        Examples:
            >>> IPython.display.HTML(client.probe().to_html())
        """
        return probe_html(self)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "server", self.server.base_url
        yield "version", self.server.version
        yield "served", self.served_tasks
        yield "advisories", [advisory.id for advisory in self.advisories]
        if self.ngram_processor is not None:
            yield "ngram_processor", self.ngram_processor


# --------------------------------------------------------------------------------------------------
# Notebook view
# --------------------------------------------------------------------------------------------------


_STATUS_COLORS = {
    "served": "#2e7d32",
    "not_served": "#757575",
    "inactive": "#ef6c00",
    "unauthorized": "#c62828",
    "error": "#c62828",
}


def _status(status: str) -> str:
    color = _STATUS_COLORS.get(status, "#757575")
    return f'<span style="color:{color};font-weight:600">{esc(status)}</span>'


def _reference(reference: str | None) -> str:
    if not reference:
        return ""
    if reference.lower().startswith(("https://", "http://")):
        return f' <a href="{esc(reference)}" target="_blank" rel="noopener noreferrer">reference</a>'
    return f" ({esc(reference)})"


def probe_html(report: ProbeReport, *, max_chars: int = defaults.VIEW_MAX_CELL_CHARS) -> str:
    """The view of a :class:`~vllm_tasks.ProbeReport`: the served-task table, the models and advisories."""
    server = report.server
    facts: list[tuple[str, object]] = [
        ("server", server.base_url),
        ("vLLM", server.version or "hidden"),
        ("served", f"{len(report.served_tasks)} of {len(report.tasks)} tasks"),
        (
            "n-gram processor",
            None if report.ngram_processor is None else ("loaded" if report.ngram_processor else "MISSING"),
        ),
    ]
    rows = [
        [
            esc(probe.task),
            f"<code>{esc(probe.path)}</code>",
            _status(str(probe.status)),
            esc(probe.http_status if probe.http_status is not None else ""),
            esc(clip(probe.detail or "", max_chars)),
        ]
        for probe in report.tasks
    ]
    columns = [("task", False), ("route", False), ("status", False), ("HTTP", True), ("detail", False)]
    models = [
        [esc(model.id), esc(model.root or ""), esc(model.parent or ""), esc(model.max_model_len or "")]
        for model in server.models[: defaults.VIEW_MAX_ROWS]
    ]
    model_columns = [("model", False), ("root", False), ("parent", False), ("max_model_len", True)]
    advisories = "".join(
        f"<li><b>{esc(a.id)}</b>: {esc(clip(a.message, 2000))}{_reference(a.reference)}</li>"
        for a in report.advisories
    )
    body = [
        table(columns, rows, total=len(report.tasks), noun="task"),
        table(model_columns, models, total=len(server.models), noun="model"),
        f'<div><b>Advisories</b><ul style="margin:4px 0">{advisories}</ul></div>'
        if advisories
        else note("no advisories for this server"),
    ]
    return card("ProbeReport", facts, *body)
