"""Error-body parsing and mapping, with bodies in the shapes the vLLM reference documents."""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.jobs import InsufficientDiskSpace
from vllm_tasks.server_errors import error_from_response, parse_error_body

from .conftest import BASE

VALIDATION = {
    "error": {
        "message": "1 validation error:\n  {'type': 'greater_than_equal', 'loc': ('body', 'top_n'), "
        "'msg': 'Input should be greater than or equal to 0', 'input': -1}",
        "type": "Bad Request",
        "param": "body.top_n",
        "code": 400,
    }
}
CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 256 tokens. However, your prompt contains 300 "
        "input tokens, which exceeds the limit. (parameter=input_tokens, value=300)",
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
    }
}
MATRYOSHKA = {
    "error": {
        "message": "Model 'minilm' does not support Matryoshka embeddings; dimensions must be unset "
        "(received dimensions=128).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
FLAT = {"object": "error", "message": "old style", "type": "BadRequestError", "param": "input", "code": 400}


def response(
    status: int, body: Any, path: str = "/v1/embeddings", headers: dict[str, str] | None = None
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(
        status, content=content, headers=headers, request=httpx.Request("POST", BASE + path)
    )


@pytest.mark.parametrize(
    ("status", "body", "message", "param"),
    [
        (400, VALIDATION, VALIDATION["error"]["message"], "body.top_n"),
        (400, FLAT, "old style", "input"),
        (401, {"error": "Unauthorized"}, "Unauthorized", None),
        (404, {"detail": "Not Found"}, "Not Found", None),
        (422, {"detail": [{"loc": ["body", "file"], "msg": "field required"}]}, None, None),
        (503, b"", "Service Unavailable", None),
        (502, b"<html>Bad Gateway</html>", "<html>Bad Gateway</html>", None),
        (400, {"error": {"message": "bad (parameter=top_n, value=-1)", "param": None}}, None, "top_n"),
    ],
)
def test_parse_every_body_shape(status: int, body: Any, message: str | None, param: str | None) -> None:
    parsed_message, parsed_param, _ = parse_error_body(response(status, body))
    if message is not None:
        assert parsed_message == message
    assert parsed_message
    assert parsed_param == param


@pytest.mark.parametrize(
    ("status", "body", "path", "cls"),
    [
        (400, VALIDATION, "/rerank", vt.BadRequestError),
        (400, CONTEXT, "/v1/embeddings", vt.ContextLengthExceeded),
        (400, MATRYOSHKA, "/v1/embeddings", vt.BadRequestError),
        (401, {"error": "Unauthorized"}, "/v1/embeddings", vt.AuthenticationError),
        (403, {"detail": "Forbidden"}, "/v1/embeddings", vt.PermissionDeniedError),
        (404, {"detail": "Not Found"}, "/v1/embeddings", vt.EndpointNotServed),
        (
            404,
            {"error": {"message": "The model `x` does not exist.", "code": 404}},
            "/v1/embeddings",
            vt.NotFoundError,
        ),
        (409, {"detail": "conflict"}, "/score", vt.ConflictError),
        (413, b"", "/v1/audio/transcriptions", vt.RequestTooLargeError),
        (422, {"error": {"message": "fetch failed"}}, "/v1/chat/completions", vt.UnprocessableEntityError),
        (429, {"error": {"message": "slow down"}}, "/score", vt.RateLimitError),
        (500, {"error": {"message": "boom"}}, "/score", vt.InternalServerError),
        (502, b"", "/score", vt.InternalServerError),
        (503, b"", "/score", vt.ServiceUnavailableError),
        (504, b"<html><h1>504 Gateway Time-out</h1></html>", "/v1/embeddings", vt.GatewayTimeoutError),
        (
            501,
            {"error": {"message": "The model does not support Embeddings API", "code": 501}},
            "/v1/embeddings",
            vt.EndpointNotServed,
        ),
        (
            400,
            {"error": {"message": "Maximum file size exceeded (parameter=audio_filesize_mb, value=30)"}},
            "/v1/audio/transcriptions",
            vt.BadRequestError,
        ),
    ],
)
def test_status_and_message_map_to_the_right_class(status: int, body: Any, path: str, cls: type) -> None:
    error = error_from_response(response(status, body, path))
    assert type(error) is cls
    assert isinstance(error, vt.APIStatusError)
    assert isinstance(error, vt.VLLMTasksError)
    assert error.status_code == status


@pytest.mark.parametrize(
    ("status", "body", "path", "kind"),
    [
        (400, CONTEXT, "/v1/embeddings", "context_length_exceeded"),
        (400, MATRYOSHKA, "/v1/embeddings", "matryoshka_not_supported"),
        (
            400,
            {
                "error": {
                    "message": "Unsupported input_type 'query'. This model does not define any input_type"
                }
            },
            "/v2/embed",
            "input_type_not_supported",
        ),
        (
            400,
            {"error": {"message": "Maximum file size exceeded (parameter=audio_filesize_mb, value=30)"}},
            "/v1/audio/transcriptions",
            "audio_too_large",
        ),
        (
            404,
            {"error": {"message": "The model `x` does not exist.", "code": 404}},
            "/v1/embeddings",
            "model_not_found",
        ),
        (400, VALIDATION, "/rerank", None),
        (500, {"error": {"message": "boom"}}, "/score", None),
    ],
)
def test_vllm_wordings_users_act_on_set_the_kind(status: int, body: Any, path: str, kind: str | None) -> None:
    error = error_from_response(response(status, body, path))
    assert error.kind == kind
    if kind == "audio_too_large":
        assert "chunking='auto'" in str(error)


def test_context_length_details() -> None:
    error = error_from_response(response(400, CONTEXT))
    assert isinstance(error, vt.ContextLengthExceeded)
    assert (error.max_model_len, error.prompt_tokens, error.param) == (256, 300, "input_tokens")


def test_context_length_counted_in_characters_is_not_a_token_count() -> None:
    # What vLLM 0.32 answers a bi-encoder /score or /rerank whose text is over the character bound
    # (recorded from the `embed` fixture): the number it states is characters, not tokens.
    body = {
        "error": {
            "message": "This model's maximum context length is 256 tokens. However, your prompt contains "
            "5130 characters (more than 4608 characters, which is the upper bound for 256 input tokens). "
            "Please reduce the length of the input prompt. (parameter=input_text, value=5130)",
            "type": "BadRequestError",
            "param": "input_text",
            "code": 400,
        }
    }
    error = error_from_response(response(400, body, "/score"))
    assert isinstance(error, vt.ContextLengthExceeded)
    assert (error.max_model_len, error.prompt_tokens, error.param) == (256, None, "input_text")


def test_context_length_at_least_n_tokens() -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 256 tokens. However, your prompt contains at "
            "least 257 input tokens, which exceeds this limit even without any output tokens. Please reduce "
            "the length of the input prompt. (parameter=input_tokens, value=257)",
            "param": "input_tokens",
        }
    }
    error = error_from_response(response(400, body, "/v1/embeddings"))
    assert isinstance(error, vt.ContextLengthExceeded)
    assert (error.max_model_len, error.prompt_tokens) == (256, 257)


# Each wording as a real vLLM server answered it (issue 14's version matrix, embed and rerank fixtures).
@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        pytest.param(
            "This model's maximum context length is 256 tokens. However, your request has 602 input tokens. "
            "Please reduce the length of the input messages.",
            602,
            id="0.11-embeddings",
        ),
        pytest.param(
            "This model's maximum context length is 256 tokens. However, you requested 604 tokens in the "
            "input for score. Please reduce the length of the input.",
            604,
            id="0.11-score",
        ),
        pytest.param(
            "You passed 257 input tokens and requested 0 output tokens. However, the model's context length "
            "is only 256 tokens, resulting in a maximum input length of 256 tokens. Please reduce the length "
            "of the input prompt. (parameter=input_tokens, value=257)",
            257,
            id="0.16-embeddings",
        ),
        pytest.param(
            "This model's maximum context length is 256 tokens. However, you requested 0 output tokens and "
            "your prompt contains at least 257 input tokens, for a total of at least 257 tokens. Please "
            "reduce the length of the input prompt or the number of requested output tokens. "
            "(parameter=input_tokens, value=257)",
            257,
            id="0.19-0.23",
        ),
    ],
)
def test_context_length_wordings_of_every_version(message: str, tokens: int) -> None:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    error = error_from_response(response(400, body, "/v1/embeddings"))
    assert isinstance(error, vt.ContextLengthExceeded)
    assert (error.max_model_len, error.prompt_tokens) == (256, tokens)


@pytest.mark.parametrize(
    "message",
    [
        'Model "minilm" only supports [128, 256, 384] matryoshka dimensions, use other output dimensions '
        "will lead to poor results.",
        'Model "minilm" does not support matryoshka representation, changing output dimensions will lead to '
        "poor results.",
        "Model 'minilm' does not support Matryoshka embeddings; dimensions must be unset (received "
        "dimensions=128).",
    ],
    ids=["0.11-0.25-list", "0.11-0.23-not-matryoshka", "0.32-not-matryoshka"],
)
def test_matryoshka_refusals_of_every_version(message: str) -> None:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    error = error_from_response(response(400, body, "/v1/embeddings"))
    assert type(error) is vt.BadRequestError and error.kind == "matryoshka_not_supported"


def test_matryoshka_error_names_the_operator_fix() -> None:
    error = error_from_response(response(400, MATRYOSHKA))
    assert '"is_matryoshka": true' in str(error)
    assert "matryoshka_dimensions" in str(error)


@pytest.mark.parametrize(
    ("path", "status", "message", "task", "reason", "hint"),
    [
        ("/v1/embeddings", 404, "Not Found", "embed", "not_mounted", "--runner pooling"),
        (
            "/v1/embeddings",
            501,
            "The model does not support Embeddings API",
            "embed",
            "inactive",
            "pooler-config",
        ),
        pytest.param(  # vLLM 0.11.0 (a real server) answers 400 where later versions say 501
            "/classify",
            400,
            "The model does not support Classification API",
            "classify",
            "inactive",
            "classif",
            id="0.11-400-inactive",
        ),
        ("/rerank", 404, "Not Found", "rerank", "not_mounted", "cross-encoder"),
        ("/v1/audio/transcriptions", 404, "Not Found", "transcription", "not_mounted", "whisper"),
        ("/v1/chat/completions", 404, "Not Found", "chat", "not_mounted", "NGramPerReqLogitsProcessor"),
    ],
)
def test_endpoint_not_served_says_which_task_and_how_to_fix(
    path: str, status: int, message: str, task: str, reason: str, hint: str
) -> None:
    body = {"detail": message} if status == 404 else {"error": {"message": message, "code": status}}
    error = error_from_response(response(status, body, path))
    assert isinstance(error, vt.EndpointNotServed)
    assert (error.task, error.reason) == (task, reason)
    assert f"`{task}`" in str(error)
    assert hint in str(error)


def test_request_id_and_body_are_kept() -> None:
    error = error_from_response(response(400, VALIDATION, headers={"x-request-id": "req-42"}))
    assert error.request_id == "req-42"
    assert error.body == VALIDATION


def test_credentials_in_url_are_redacted() -> None:
    error = error_from_response(response(500, b""), url="http://user:pw@host:8000/score")
    assert error.url == "http://host:8000/score"
    assert "pw" not in str(error)


def test_api_key_never_appears_in_errors_reprs_logs_or_chains(
    make_client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-very-secret-key-123"
    httpx_mock.add_response(url=f"{BASE}/version", status_code=503, is_reusable=True, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=401, json={"error": "Unauthorized"})
    httpx_mock.add_response(
        url=f"{BASE}/openapi.json", status_code=404, json={"detail": "Not Found"}, is_optional=True
    )
    client = make_client(api_key=secret, max_retries=1)
    caplog.set_level(logging.DEBUG, logger="vllm_tasks")
    with pytest.raises(vt.AuthenticationError) as info:
        client.server_info()
    rendered = "".join(traceback.format_exception(info.value))
    for text in (
        rendered,
        repr(info.value),
        str(info.value),
        repr(client),
        caplog.text,
        repr(vars(info.value)),
    ):
        assert secret not in text


def _error_classes() -> dict[str, type[vt.VLLMTasksError]]:
    found: dict[str, type[vt.VLLMTasksError]] = {}
    todo: list[type[vt.VLLMTasksError]] = [vt.VLLMTasksError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_the_scope_the_reference_table_gives_it() -> None:
    # The jobs, the folder jobs and Ray's error column act on error.scope alone; the table in
    # docs/reference/errors.md is what users read: the two must say the same for every class.
    from pathlib import Path

    classes = _error_classes()
    text = (Path(__file__).parents[2] / "docs/reference/errors.md").read_text()
    named: dict[str, str] = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0] in ('`"row"`', '`"options"`', '`"replica"`', '`"job"`'):
            scope = cells[0].strip('`"')
            for name in cells[1].split("`")[1::2]:
                if name in classes and scope != "job":
                    named[name] = scope
    assert {"InvalidInputError", "UnsupportedByServer", "APIConnectionError"} <= named.keys()
    for name, cls in classes.items():
        assert cls.scope == named.get(name, "job"), name


@pytest.mark.parametrize(
    ("kind", "scope"),
    [("matryoshka_not_supported", "options"), ("input_type_not_supported", "options"), (None, "row")],
)
def test_a_400_about_the_options_is_about_the_options(kind: Any, scope: str) -> None:
    error = vt.BadRequestError("refused", status_code=400, kind=kind)
    assert error.scope == scope
    assert vt.errors.is_about(error, scope)  # type: ignore[arg-type]
    assert vt.errors.is_about(pickle_round_trip(error), scope)  # type: ignore[arg-type]


def pickle_round_trip(error: BaseException) -> BaseException:
    import pickle

    return pickle.loads(pickle.dumps(error))  # type: ignore[no-any-return]


def test_insufficient_disk_space_never_asks_to_free_a_negative_amount() -> None:
    message = str(InsufficientDiskSpace("/out.npy", needed=100, free=5_000))
    assert "Free 0 bytes or more" in message
    assert "-" not in message.split("free.")[1].split("bytes", maxsplit=1)[0]
