"""The ``vllm-tasks`` console script: operator tools over the same client.

Exit codes: 0 success, 1 the server answered with an error, 2 the server could not be reached, 64 bad
usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ._sync.client import Client
from .errors import APIConnectionError, APIError, InvalidInputError
from .types.server import ProbeReport, TaskStatus

EXIT_OK = 0
EXIT_SERVER_ERROR = 1
EXIT_UNREACHABLE = 2
EXIT_USAGE = 64


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``vllm-tasks`` (one sub-command per tool)."""
    parser = argparse.ArgumentParser(prog="vllm-tasks", description=__doc__.splitlines()[0])
    parser.add_argument("--api-key", default=None, help="API key (default: env VLLM_API_KEY)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    commands = parser.add_subparsers(dest="command", required=True)
    probe = commands.add_parser("probe", help="show which tasks a server serves, and known pitfalls")
    probe.add_argument("url", nargs="?", default=None, help="server root URL (default: env or localhost)")
    probe.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def format_probe(report: ProbeReport) -> str:
    """A human-readable probe report."""
    info = report.server
    lines = [
        f"server   {info.base_url}",
        f"version  {info.version or 'unknown (hidden)'}",
    ]
    for card in info.models:
        lines.append(f"model    {card.id}  root={card.root}  max_model_len={card.max_model_len}")
    if not info.models:
        lines.append("model    (none listed: /v1/models needs an API key or failed)")
    lines.append(
        "routes   " + ("openapi.json disabled" if info.routes is None else f"{len(info.routes)} mounted")
    )
    lines.append("")
    marks = {
        TaskStatus.SERVED: "yes",
        TaskStatus.NOT_SERVED: "no (404)",
        TaskStatus.INACTIVE: "inactive (501)",
        TaskStatus.UNAUTHORIZED: "unauthorized (401)",
        TaskStatus.ERROR: "error",
    }
    for task in report.tasks:
        detail = f"  {task.detail}" if task.status is TaskStatus.ERROR and task.detail else ""
        lines.append(f"{task.task:<14} {task.path:<26} {marks[task.status]}{detail}")
    if report.advisories:
        lines.append("")
        for advisory in report.advisories:
            ref = f" [{advisory.reference}]" if advisory.reference else ""
            lines.append(f"advisory {advisory.id}: {advisory.message}{ref}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with Client(args.url, api_key=args.api_key, timeout=args.timeout, max_retries=0) as client:
            report = client.probe()
    except InvalidInputError as error:
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_USAGE
    except APIConnectionError as error:
        print(f"vllm-tasks: server unreachable: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except APIError as error:
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_SERVER_ERROR
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        print(format_probe(report))
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
