"""A LanceDB embedding function over the SDK: a table's vectors and its queries embedded by the same vLLM
server, with the same prompts, version gates, retries and typed errors as ``Client.embed``.

``pip install "vllm-tasks[lancedb]"``. Importing this module registers :class:`VLLMEmbeddingFunction` in
LanceDB's embedding registry as ``"vllm-tasks"``; a table made with it records its settings (never the
API key) and rebuilds it when opened again, so ``table.search("query")`` embeds the query through the
server. See ``docs/integrations.md``.

Examples:
    >>> import lancedb
    >>> from lancedb.embeddings import get_registry
    >>> from lancedb.pydantic import LanceModel, Vector
    >>> import vllm_tasks.integrations.lancedb
    >>> vllm = get_registry().get("vllm-tasks").create(
    ...     base_url="http://localhost:8000", query_prompt_name="query", document_prompt_name="document"
    ... )
    >>> class Docs(LanceModel):
    ...     text: str = vllm.SourceField()
    ...     vector: Vector(vllm.ndims()) = vllm.VectorField()
    >>> table = lancedb.connect("./db").create_table("docs", schema=Docs)
    >>> table.add([{"text": "Paris is the capital of France."}, {"text": "Bananas are yellow."}])
    >>> table.search("capital of France?").limit(1).to_list()[0]["text"]
    'Paris is the capital of France.'
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from ..dependencies import require

require("lancedb", "lancedb", "vllm_tasks.integrations.lancedb")

import numpy as np
import numpy.typing as npt
from lancedb.embeddings import TextEmbeddingFunction, register
from pydantic import PrivateAttr, model_validator

from .._sync.isolation import isolate_rows
from ..embeddings import EmbedParams
from ..errors import APIError
from ..jobs.state import PROBE_TEXT
from ._common import EmbedOptions, one_text

__all__ = ["VLLMEmbeddingFunction"]

logger = logging.getLogger("vllm_tasks.integrations.lancedb")

Vector = npt.NDArray[np.float32]


@register("vllm-tasks")  # type: ignore[no-untyped-call]  # lancedb's decorator is untyped
class VLLMEmbeddingFunction(EmbedOptions, TextEmbeddingFunction):
    """A LanceDB ``TextEmbeddingFunction`` served by vLLM's ``/v1/embeddings`` (through the SDK),
    registered as ``"vllm-tasks"``.

    Documents (the source column, at ``table.add``) and queries (``table.search("...")``) can carry
    different prompts, as asymmetric retrieval models want: the model's own named prompts
    (``query_prompt_name="query"``, applied by the server from the model's sentence-transformers
    config, vLLM >= 0.20 as ``prompt_name`` of ``Client.embed``) or a text put before each input
    (``query_prompt="query: "`` for E5). ``ndims()`` is the server's width (with ``params.dimensions``),
    asked once.

    A document the server refuses (too long, ...) gets no vector (``None``, which LanceDB's
    ``on_bad_vectors`` handles; logged at WARNING); any other error, and any error of a query, is the
    SDK's typed error. Retries are the SDK's (``max_retries`` of the settings): LanceDB's own retry loop
    is not used.

    The server connection is one ``vllm_tasks.ClientSettings``, as for the other adapters:
    ``settings=`` (default: from the environment, ``VLLM_TASKS_BASE_URL`` and ``VLLM_API_KEY``), or its
    settings by name (``base_url=``, ``model=``, ``timeout=``, ...), or your own ``client=``. An API key
    given to ``create`` must be a LanceDB variable (``api_key="$var:vllm_key"``, see LanceDB's
    ``registry.set_var``); the table records the variable's name, never the key.

    Attributes:
        params: the vector options of every request (``vllm_tasks.EmbedParams(dimensions=256)`` or a dict
            of its fields).
        query_prompt, query_prompt_name: the prompt of queries (a text put before, or the model's prompt
            name); at most one of the two.
        document_prompt, document_prompt_name: the same for documents.
        batch_size: texts per request; concurrency: requests in flight (or ``"auto"``).
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad setting or field value (naming it), at construction; a prompt and a
            prompt name on one side, or a prompt name with an option ``/v2/embed`` lacks.

    Examples:
        >>> vllm = VLLMEmbeddingFunction(base_url="http://localhost:8000", query_prompt="query: ")
        >>> vllm.ndims()
        384
        >>> vllm.compute_query_embeddings("what is vLLM?")[0].shape
        (384,)
    """

    query_prompt: str | None = None
    query_prompt_name: str | None = None
    document_prompt: str | None = None
    document_prompt_name: str | None = None

    _width: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_prompts(self) -> VLLMEmbeddingFunction:
        self._side("query")
        self._side("document")
        return self

    @staticmethod
    def sensitive_keys() -> list[str]:
        """The API key: LanceDB refuses it in ``create`` unless it is a ``$var:`` variable."""
        return ["api_key"]

    def _side(self, side: str) -> EmbedParams:
        """The vector options of queries or documents: ``params`` with that side's prompt."""
        prompt, name = getattr(self, f"{side}_prompt"), getattr(self, f"{side}_prompt_name")
        if prompt is None and name is None:
            return self.params
        return dataclasses.replace(self.params, prompt=prompt, prompt_name=name)

    def _embed(self, texts: list[str], side: str) -> list[Vector]:
        options = {**self._options(), **self._side(side).keywords()}
        vectors = self._sync_client().embed(texts, **options).vectors
        return list(vectors)

    def ndims(self) -> int:
        """The vectors' width: ``params.dimensions``, else the width of the server's answer to one
        text (asked once).

        Raises:
            VLLMTasksError: the SDK's errors, as ``Client.embed`` raises them.
        """
        if self._width is None:
            self._width = self.params.dimensions or len(self._embed([PROBE_TEXT], "document")[0])
        return self._width

    def compute_query_embeddings(self, query: str, *args: Any, **kwargs: Any) -> list[Vector | None]:
        """The query's vector, with the query prompt (a list of one, as LanceDB wants).

        Raises:
            InvalidInputError: ``query`` is not a string. Server errors as ``Client.embed`` raises them.
        """
        return list(self._embed([one_text(query, "query")], "query"))

    def compute_source_embeddings(self, texts: Any, *args: Any, **kwargs: Any) -> list[Vector | None]:
        """The documents' vectors, with the document prompt; ``None`` for a null text and for a text the
        server refuses (the others all get theirs).

        Raises:
            VLLMTasksError: an error that is not about one text (connection, authentication, ...).
        """
        return self.generate_embeddings(self.sanitize_input(texts))

    def generate_embeddings(
        self, texts: list[str] | npt.NDArray[Any], *args: Any, **kwargs: Any
    ) -> list[Vector | None]:
        """:meth:`compute_source_embeddings` of a list of texts."""
        texts = list(texts)
        vectors: list[Vector | None] = [None] * len(texts)
        rows = [index for index, text in enumerate(texts) if text is not None]
        items = [one_text(texts[index], f"texts[{index}]") for index in rows]

        def send(part: Sequence[int]) -> list[Vector]:
            return self._embed([items[k] for k in part], "document")

        def refused(position: int, error: Exception) -> None:
            message = error.message if isinstance(error, APIError) else str(error)
            logger.warning("text %d refused, no vector: %s", rows[position], message)

        for part, answer in isolate_rows(send, range(len(rows)), refused):
            for position, vector in zip(part, answer, strict=True):
                vectors[rows[position]] = vector
        return vectors

    def compute_query_embeddings_with_retry(self, *args: Any, **kwargs: Any) -> list[Vector | None]:
        """:meth:`compute_query_embeddings`: the SDK retries, so LanceDB's loop (which retries any error
        and wraps it in a bare ``Exception``) is not used."""
        return self.compute_query_embeddings(*args, **kwargs)

    def compute_source_embeddings_with_retry(self, *args: Any, **kwargs: Any) -> list[Vector | None]:
        """:meth:`compute_source_embeddings` (the SDK retries, as above)."""
        return self.compute_source_embeddings(*args, **kwargs)

    def safe_model_dump(self) -> dict[str, Any]:
        """What a table records to rebuild this function: its fields as JSON, the settings without the
        API key (an ``api_key="$var:NAME"`` given to ``create`` is kept as the variable's name)."""
        dump: dict[str, Any] = self.model_dump(mode="json", exclude={"max_retries"})
        given = getattr(self, "_original_args", {}).get("api_key")
        if isinstance(given, str) and given.startswith("$var:"):
            dump["api_key"] = given
        return dump
