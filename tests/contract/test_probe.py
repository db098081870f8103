"""probe(): the Python client, the console script and the curl-only script agree on a real server."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import cli

pytestmark = pytest.mark.contract

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "embed": "served",
    "embed_v2": "served",
    "score": "served",
    "rerank": "served",
    "classify": "not_served",
    "pooling": "served",
    "transcription": "not_served",
    "translation": "not_served",
    "chat": "not_served",
}
SCRIPT_WORDS = {"served": "yes", "not_served": "no (404)", "inactive": "inactive (501)"}


def test_probe_of_the_embed_server(vllm_embed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with vt.Client(vllm_embed.base_url) as client:
        report = client.probe()
    assert {task.task: task.status.value for task in report.tasks} == EXPECTED
    assert report.server.version == "0.32.0"
    assert report.server.max_model_len == 256
    assert cli.main(["probe", vllm_embed.base_url, "--json"]) == cli.EXIT_OK
    printed = json.loads(capsys.readouterr().out)
    assert {task["task"]: task["status"] for task in printed["tasks"]} == EXPECTED


def test_curl_script_reports_the_same(vllm_embed: Any) -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "probe-endpoint.sh"), vllm_embed.base_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert '"version":"0.32.0"' in done.stdout
    for task, status in EXPECTED.items():
        assert re.search(rf"^{task}\s+\S+\s+{re.escape(SCRIPT_WORDS[status])}$", done.stdout, re.MULTILINE), (
            task
        )


def test_curl_script_unreachable_exits_2() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "probe-endpoint.sh"), "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "unreachable" in done.stderr


def test_inactive_task_on_the_late_interaction_server(vllm_late_interaction: Any) -> None:
    with vt.Client(vllm_late_interaction.base_url) as client:
        report = client.probe()
    assert report.status("embed") is vt.types.TaskStatus.INACTIVE
    assert report.status("pooling") is vt.types.TaskStatus.SERVED
