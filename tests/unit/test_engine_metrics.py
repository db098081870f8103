"""Reading vLLM's ``/metrics`` (``vllm_tasks.engine_metrics``): the Prometheus text parser (any text: a
load or ``None``, never an exception) and when samples are taken (in virtual time: the caller's clock)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_tasks.engine_metrics import SAMPLE_INTERVAL, EngineLoad, EngineSampler, parse_metrics

# vLLM 0.32's layout: HELP and TYPE lines, labelled samples, other metrics around them
VLLM_BODY = """# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 8712.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="bge"} 3.0
vllm:num_requests_running{engine="1",model_name="bge"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="bge"} 1.0
vllm:num_requests_waiting{engine="1",model_name="bge"} 0.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="bge",reason="capacity"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="bge"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="bge"} 0.5
"""


def test_the_engines_are_summed_and_the_fullest_cache_is_read() -> None:
    assert parse_metrics(VLLM_BODY) == EngineLoad(running=5.0, waiting=1.0, kv_cache_usage=0.5)
    other = VLLM_BODY.replace('"bge"} 3.0', '"bge"} 7.0')
    assert parse_metrics(other) == EngineLoad(running=9.0, waiting=1.0, kv_cache_usage=0.5)


def test_the_older_cache_gauge_is_read_where_the_newer_is_absent() -> None:
    older = VLLM_BODY.replace("kv_cache_usage_perc", "gpu_cache_usage_perc")
    assert parse_metrics(older) == EngineLoad(running=5.0, waiting=1.0, kv_cache_usage=0.5)
    assert parse_metrics(older.replace("vllm:gpu_cache_usage_perc", "other")) == EngineLoad(5.0, 1.0, None)


def test_what_is_not_vllms_metrics_is_none() -> None:
    assert parse_metrics("") is None
    assert parse_metrics('{"detail": "Not Found"}') is None
    assert parse_metrics(VLLM_BODY.replace("vllm:num_requests_waiting{", "x{")) is None
    assert parse_metrics(VLLM_BODY.replace("} 1.0\n", "} NaN\n", 1)) is None
    assert parse_metrics(VLLM_BODY.replace("} 1.0\n", "} -1\n", 1)) is None


LINE = st.one_of(
    st.text(max_size=60),
    st.builds(
        "{}{{{}}} {}".format,
        st.sampled_from(
            ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"]
        ),
        st.text(max_size=20),
        st.one_of(st.text(max_size=8), st.floats(allow_nan=True).map(str)),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(LINE, max_size=12).map("\n".join))
def test_any_text_is_a_load_or_none(text: str) -> None:
    load = parse_metrics(text)
    assert load is None or (load.running >= 0 and load.waiting >= 0)


def test_samples_are_taken_one_at_a_time_at_most_every_interval() -> None:
    sampler = EngineSampler()
    assert sampler.due(0.0) and not sampler.due(1.0)  # one in progress: no second
    sampler.read(EngineLoad(1, 0))
    assert not sampler.due(SAMPLE_INTERVAL / 2) and sampler.due(SAMPLE_INTERVAL)
    sampler.read(None)  # not vLLM's metrics: never asked again
    assert sampler.served is False and not sampler.due(100.0) and sampler.samples == 1


def test_a_body_recorded_from_vllm_0_32_is_read() -> None:
    # GET /metrics of the `embed` CPU fixture (MiniLM) after 8 requests of 8 texts: 64 engine requests
    body = (Path(__file__).parents[1] / "data/vllm-0.32-metrics.txt").read_text()
    load = parse_metrics(body)
    assert load is not None
    assert (load.running, load.waiting, load.kv_cache_usage, load.finished) == (0.0, 0.0, 0.0, 64.0)
    assert load.queue_seconds == pytest.approx(0.004107441956875846)
    assert load.inference_seconds == pytest.approx(32.02054651995422)
