"""The shape the core issue set for vllm_tasks/: short functions, one sealed transport, no step protocol."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vllm_tasks"
MAX_FUNCTION_LINES = 80


def hand_written_modules() -> list[Path]:
    """Every module of the package except the generated sync twin."""
    return sorted(path for path in PACKAGE.rglob("*.py") if "_sync" not in path.parts)


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines from ``def`` to its end, less its docstring."""
    assert node.end_lineno is not None
    total = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        total -= first.end_lineno - first.lineno + 1
    return total


def test_no_function_is_over_80_lines_of_code() -> None:
    long = []
    for path in hand_written_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = code_lines(node)
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "split these functions:\n" + "\n".join(long)


def test_the_step_protocol_is_gone() -> None:
    assert not (PACKAGE / "steps.py").exists()
    for path in hand_written_modules():
        text = path.read_text()
        assert "steps import" not in text and "._run(" not in text, path


def test_only_the_transport_touches_the_network() -> None:
    """Client code sends through the transport's public methods, never through httpx or its privates."""
    sending = {"send", "stream", "build_request", "get", "post", "request"}
    offenders = []
    for path in hand_written_modules():
        if path.name == "transport.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = ast.unparse(node.value)
            if owner.endswith("_http") and node.attr in sending:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {owner}.{node.attr}")
            if owner.endswith("transport") and node.attr.startswith("_"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {owner}.{node.attr}")
    assert not offenders, "\n".join(offenders)
