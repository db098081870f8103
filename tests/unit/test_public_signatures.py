"""One shape for every task method: the input first, keyword-only options, the per-call tail last; and one
params object per family whose fields are the methods' keyword arguments, with the same defaults."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.token_classification import TokenClassifyParams

TAIL = ["model", "extra_body", "extra_headers", "timeout"]
#: Methods whose leading positional arguments are not one input (or a query and its documents).
NOT_TASKS = {"wait_until_ready", "with_options", "from_settings"}

#: params class -> the methods it stands for, and the fields a method may lack (it refuses them anyway).
FAMILIES: dict[type, dict[str, set[str]]] = {
    vt.EmbedParams: {"embed": set()},
    vt.EmbedV2Params: {"embed_v2": set()},
    vt.RerankParams: {"rerank": set(), "score": set()},
    vt.ClassifyParams: {"classify": set()},
    vt.PoolParams: {"pool": set()},
    TokenClassifyParams: {"token_classify": set()},
    vt.OCRParams: {"ocr": set(), "ocr_pdf": set()},
    vt.TranscribeParams: {
        "transcribe": set(),
        "translate": {"timestamp_granularities"},  # translations have no timestamps
        # beam search and its width are refused on streams
        "transcribe_stream": {"timestamp_granularities", "n", "length_penalty"},
        "translate_stream": {"timestamp_granularities", "n", "length_penalty"},
    },
}


def public_methods(cls: type) -> list[tuple[str, inspect.Signature]]:
    return [
        (name, inspect.signature(function))
        for name, function in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") and name not in NOT_TASKS
    ]


@pytest.mark.parametrize("cls", [vt.Client, vt.AsyncClient], ids=["sync", "async"])
def test_the_input_comes_first_and_the_per_call_tail_last(cls: type) -> None:
    for name, signature in public_methods(cls):
        parameters = list(signature.parameters.values())[1:]
        positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert len(positional) <= 2, f"{name}: only the input is positional, not {positional}"
        names = [p.name for p in parameters]
        tail = [n for n in TAIL if n in names]
        assert names[len(names) - len(tail) :] == tail, f"{name} ends with {names[-len(tail) :]}, not {tail}"


@pytest.mark.parametrize("params_class", list(FAMILIES), ids=lambda cls: cls.__name__)
def test_params_fields_are_the_methods_keywords_with_their_defaults(params_class: type) -> None:
    for method, may_lack in FAMILIES[params_class].items():
        for client in (vt.Client, vt.AsyncClient):
            parameters = inspect.signature(getattr(client, method)).parameters
            for field in dataclasses.fields(params_class):
                if field.name in may_lack:
                    assert field.name not in parameters, f"{method} takes {field.name}: drop it from may_lack"
                    continue
                assert field.name in parameters, f"{client.__name__}.{method} has no {field.name}"
                assert parameters[field.name].default == field.default, (method, field.name)


def test_keywords_are_the_changed_fields_and_a_method_takes_them() -> None:
    params = vt.TranscribeParams(language="de", temperature=0.0)
    assert params.keywords() == {"language": "de", "temperature": 0.0}
    inspect.signature(vt.Client.translate).bind(None, "a.wav", **params.keywords())
    assert vt.OCRParams(whitelist_token_ids=(1, 2)).changed() == {"whitelist_token_ids": [1, 2]}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (4, "params='int': must be vllm_tasks.EmbedParams or a dict of its fields"),
        ({"dimension": 4}, r"params=\['dimension'\]: are not fields of EmbedParams.*Use some of: dimensions"),
        ({"dimensions": 0}, "dimensions=0"),
    ],
)
def test_params_of_refuses_what_is_not_params(value: Any, message: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=message):
        vt.EmbedParams.of(value)
