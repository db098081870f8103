"""Version gates: which vLLM version (and server flag) each request feature needs.

One table, :data:`FEATURES`, read from vLLM's published source releases (the table in
``docs/client.md`` lists it, with server facts the SDK does not gate). :func:`require` checks a
request's features against a server before it is sent; when the server hides its version the request
goes out and the server's answer decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .errors import UnsupportedByServer
from .types.server import ServerInfo
from .versions import ServerVersion


@dataclass(frozen=True)
class Feature:
    """A request feature that only some vLLM versions accept.

    Attributes:
        name: the key used by operations (``"max_tokens_per_doc"``, ``"/v2/embed"``, ...).
        min_version: the first vLLM release that accepts it (``None`` when only a flag matters).
        server_flag: a server flag without which the server ignores or refuses it, if any.
        removed_in: the first release that rejects it, for features vLLM removed.
        evidence: where the version comes from.
    """

    name: str
    min_version: str | None
    evidence: str
    server_flag: str | None = None
    removed_in: str | None = None


FEATURES: dict[str, Feature] = {
    feature.name: feature
    for feature in (
        Feature("max_tokens_per_doc", "0.20.0", "absent in 0.19.0 sdist; PR #38827"),
        Feature("max_tokens_per_query", "0.20.0", "absent in 0.19.0 sdist; PR #38827"),
        Feature("score_instruction", "0.20.0", "`instruction` on /score and /rerank, added in 0.20.0"),
        Feature("/v2/embed", "0.18.0", "absent in 0.17.0; PR #37074"),
        Feature("truncation_side", "0.18.0", "added with /v2/embed in 0.18.0"),
        Feature("v2_embed_priority", "0.18.0", "`priority` on /v2/embed arrived with the route"),
        Feature("transcription_beam_search", "0.18.0", "absent in 0.17.0; PR #36160"),
        Feature(
            "diarized_json",
            "0.27.0",
            "response_format=diarized_json on /v1/audio/transcriptions: PR #48543 (closes issue #48443), "
            "merged 2026-07-14; first release 0.27.0 per vllm-project/recipes PR #780 (not diffed sdists)",
        ),
        Feature("encoding_format_base64", "0.5.1", "PR #5935 (June 2024); present in every sdist >= 0.6.4"),
        Feature("embed_dtype", "0.11.1", "absent in 0.11.0; PR #27066"),
        Feature("endianness", "0.11.1", "absent in 0.11.0; PR #27066"),
        Feature("encoding_format_bytes", "0.11.1", "absent in 0.11.0; PR #27066"),
        Feature("encoding_format_bytes_only", "0.13.0", "absent in 0.12.0"),
        Feature(
            "sparse_embeddings",
            "0.11.1",
            "BertSpladeSparseEmbeddingModel (SPLADE on /v1/embeddings): PR #26339, opened 2025-10-07, after "
            "the 0.11.0 release; present in 0.16.0 and 0.32.0 (not diffed per release)",
            server_flag="""--hf-overrides '{"architectures": ["BertSpladeSparseEmbeddingModel"]}'""",
        ),
        Feature(
            "sparse_lexical_weights",
            "0.16.0",
            "BgeM3EmbeddingModel's token_classify (sparse_linear.pt) head: PR #14526, merged 2026-01; "
            "present in the 0.16.0 matrix venv and 0.32.0; releases before 0.16.0 not checked: the gate is "
            "conservative",
            server_flag="""--hf-overrides '{"architectures": ["BgeM3EmbeddingModel"]}' """
            """--pooler-config '{"task": "token_classify"}'""",
        ),
        Feature("/v2/rerank", "0.7.0", "absent in 0.6.4; PR #12376"),
        Feature(
            "realtime",
            "0.16.0",
            "the /v1/realtime WebSocket (vllm/entrypoints/openai/realtime/): absent in the 0.14.1 sdist, "
            "present in 0.16.0 (no 0.15 release on PyPI); PR #33187, merged 2026-01",
        ),
        Feature("score_multimodal", "0.10.0", "text_1/text_2 accept {content: [...]} since PR #20260"),
        Feature("score_queries_documents", "0.16.0", "queries/documents/items and data_1/data_2 forms"),
        Feature("score_multimodal_late_interaction", "0.17.0", "PR #34574"),
        Feature("batched_chat_embeddings", "0.25.0", "`messages` as a list of conversations"),
        Feature(
            "late_chunking",
            "0.33.0",
            "`late_chunking_params` on /v1/embeddings, served by a token_embed model only: absent in the "
            "0.32.0 wheel; 0.33.0 wheel entrypoints/pooling/token_embed/protocol.py:23-55, "
            "factories.py:132-136 (unchanged in 0.34.0)",
            server_flag="""--pooler-config '{"task": "token_embed"}'""",
        ),
        Feature(
            "reward_active_task",
            "0.19.0",
            "`reward()` without a kind sends /pooling no `task`: before 0.19 such a request answers "
            "per token for every model (0.12-0.16: the token_embed/token_classify output, 0.11: hidden "
            "states; real servers, docs/compatibility.md), so a sequence reward model would read as a "
            "token one; 0.19.1 is the first release run answering with the active task (0.17, 0.18 not run)",
        ),
        Feature(
            "reward_task",
            "0.12.0",
            "`reward(kind=...)` names the /pooling task (`classify`, `token_classify`): 0.11.0 "
            "answers hidden states whatever the task (real server); `token_classify` is a PoolingTask "
            "in the 0.16.0 and 0.32.0 sources (vllm/tasks.py), unchanged in 0.33.0 and 0.34.0",
        ),
        Feature(
            "use_activation",
            "0.12.0",
            "a real 0.11.0 server answers /classify with use_activation=false as if it were unset "
            "(0.12.0 returns the raw logit)",
        ),
        Feature(
            "deepseek_ocr_ngram_xargs",
            "0.11.1",
            "NGramPerReqLogitsProcessor reads `vllm_xargs` per request",
            server_flag=(
                "--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
            ),
        ),
        Feature(
            "normalize",
            None,
            "accepted up to 0.16; silently ignored 0.17-0.25; rejected with 400 from 0.26.0 "
            "(use_activation replaces it)",
            removed_in="0.17.0",
        ),
    )
}


def supports(info: ServerInfo, feature: str) -> bool:
    """Whether the server's version has ``feature``; True when the version is unknown.

    Raises:
        KeyError: for a feature name missing from :data:`FEATURES`.
    """
    gate = FEATURES[feature]
    version = info.parsed_version
    if not version.known:
        return True
    if gate.removed_in is not None and version.at_least(gate.removed_in):
        return False
    return gate.min_version is None or version.at_least(gate.min_version)


def require(info: ServerInfo, features: Iterable[str]) -> None:
    """Raise :class:`UnsupportedByServer` for the first feature the server's version lacks.

    Args:
        info: the server's cached description.
        features: names from :data:`FEATURES` that the request uses.

    Raises:
        UnsupportedByServer: naming the feature, the server's version and the version needed.
    """
    for name in features:
        if not supports(info, name):
            gate = FEATURES[name]
            yours = ServerVersion.parse(info.version or "unknown")
            removed = gate.removed_in is not None and yours.at_least(gate.removed_in)
            raise UnsupportedByServer(
                name,
                server_version=info.version,
                required_version=None if removed else gate.min_version,
                server_flag=gate.server_flag,
                detail=f"It was removed in vLLM {gate.removed_in}." if removed else None,
            )


def normalize_fields(info: ServerInfo, normalize: bool | None) -> dict[str, bool]:
    """Map the user's ``normalize`` wish to the field this server understands.

    vLLM <= 0.16 reads ``normalize``; 0.17-0.25 silently ignore it and 0.26+ reject it, both reading
    ``use_activation`` instead (for embeddings, True means L2-normalise).
    """
    if normalize is None:
        return {}
    if supports(info, "normalize") and info.parsed_version.known:
        return {"normalize": normalize}
    return {"use_activation": normalize}
