# GENERATED from vllm_tasks/_async/verify.py by scripts/unasync.py: do not edit.
"""``verify``: does the server's embedding model agree with a local copy of it? (``vllm_tasks.verify``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import verify as checks
from ..calls import resolve_model
from ..errors import BadRequestError, ContextLengthExceeded, UnexpectedResponse, UnsupportedByServer
from ..offload import sync_offload
from ..verify import PromptCheck, ReferenceEmbedder, VerifyReport
from .embeddings import EmbeddingMethods
from .tokenizing import count_longest


class VerifyMethods(EmbeddingMethods):
    """``verify``: the server's vectors against a reference implementation of the same model."""

    def verify(
        self,
        reference: ReferenceEmbedder | str | Path,
        *,
        texts: Sequence[str] | None = None,
        model: str | None = None,
    ) -> VerifyReport:
        """Embed a sample with the server and with a local copy of the model, and say whether they agree.

        The server's vectors are compared text by text (cosine) and as a search would use them (nearest
        neighbours). Where they differ, each usual cause is tried against the reference: another pooling
        type (``--pooler-config``), missing normalisation, a shorter context, a lower dtype; each of the
        model's named prompts is checked through ``embed(prompt_name=...)``, and how far texts embedded
        without it are from the prompted ones is reported.

        Args:
            reference: the model's sentence-transformers directory (``vllm-tasks[verify]``), or any
                :class:`~vllm_tasks.verify.ReferenceEmbedder`.
            texts: the sample (at least two texts; default: a built-in mix of queries, documents and one
                long passage).
            model: the served model (default: the client's, else the server's first).

        Returns:
            VerifyReport: ``.agrees``, the cosines, ``.neighbour_overlap`` and ``.findings`` (what differs
            and what to do).

        Raises:
            InvalidInputError: a bad sample or reference (one that returns vectors of another shape than
                the server's, or NaN or an infinity, is refused rather than compared).
            MissingDependency: a directory given without sentence-transformers installed.
            EndpointNotServed: the server does not serve embeddings.
            UnexpectedResponse: the server's vectors are not finite, or of another shape with a prompt.

        Examples:
            >>> report = client.verify("/models/Qwen3-Embedding-0.6B")
            >>> report.agrees, [finding.kind for finding in report.findings]
            (True, ['prompt'])
        """
        local = checks.as_reference(reference)
        sample = checks.sample_texts(texts)
        served, cut = self._served_vectors(sample, model)
        width = served.shape[1]
        encoded = sync_offload(local.encode, sample)
        expected = checks.reference_vectors(encoded, "reference.encode(texts)", len(sample), width)
        pooled = sync_offload(local.pooled, sample)
        alternatives = checks.reference_poolings(pooled, len(sample), width)
        whole = [index for index in range(len(sample)) if index not in cut]
        prompts = [  # none when no text was read whole: the report then says only that
            self._check_prompt(local, [sample[i] for i in whole], expected[whole], name, model)
            for name in (_named_prompts(local) if whole else [])
        ]
        info = self.server_info()
        return checks.report(
            local,
            served,
            expected,
            alternatives=alternatives,
            cut=cut,
            context=info.model_card(resolve_model(info, model, self.model)).max_model_len,
            prompts=prompts,
        )

    def _served_vectors(self, sample: list[str], model: str | None) -> tuple[npt.NDArray[Any], list[int]]:
        """The server's vectors of ``sample``; texts over its context are cut to it (and named)."""
        try:
            return (self.embed(sample, model=model)).vectors, []
        except ContextLengthExceeded as error:
            info = self.server_info()
            name = resolve_model(info, model, self.model)
            limit = error.max_model_len or info.model_card(name).max_model_len or 0
            counts = count_longest(self._transport, sample, name, limit=len(sample))
            vectors = (self.embed(sample, model=model, truncate_prompt_tokens=-1)).vectors
            return vectors, sorted(index for index, count in counts.items() if count > limit)

    def _check_prompt(
        self,
        local: ReferenceEmbedder,
        texts: list[str],
        unprompted: npt.NDArray[Any],
        name: str,
        model: str | None,
    ) -> PromptCheck:
        """The model's prompt ``name``: the server's ``embed(prompt_name=name)`` against the reference's
        prompted vectors, and how far the reference's own vectors without the prompt (``unprompted``) are
        from them (what forgetting the prompt costs, whatever the server does)."""
        encoded = sync_offload(local.encode, texts, name)
        call = f"reference.encode(texts, {name!r})"
        expected = checks.reference_vectors(encoded, call, len(texts), unprompted.shape[1])
        try:
            served = (self.embed(texts, model=model, prompt_name=name)).vectors
        except (BadRequestError, UnsupportedByServer):
            agreement: float | None = None
        else:
            if served.shape != expected.shape:
                raise UnexpectedResponse(
                    f"embed(prompt_name={name!r}) answered vectors of shape {served.shape} where the same "
                    f"texts without it gave {expected.shape}",
                    kind="decode",
                )
            agreement = float(checks.cosines(served, expected).min())
        return PromptCheck(
            name=name,
            text=local.prompts[name],
            served=agreement,
            unprompted=float(np.min(checks.cosines(unprompted, expected))),
        )


def _named_prompts(reference: ReferenceEmbedder) -> list[str]:
    """The model's prompts that add text (a ``"document": ""`` prompt changes nothing)."""
    return [name for name, text in reference.prompts.items() if text]
