"""Check gpu-recipes.json with a vLLM install's own code, without a GPU or any model download.

    <venv>/bin/python server-fixtures/check_recipes.py [RECIPES_JSON]   # prints one JSON object, exit 0

For every recipe: its `vllm serve` command line goes through that vLLM's own serve argument parser
(``ServeSubcommand``, as the ``vllm`` executable builds it) and ``validate_parsed_serve_args``, so a
removed or renamed flag, or a value the parser refuses, is reported with vLLM's message. Every chat
template a recipe names (``--chat-template``) is rendered with sample inputs in a sandboxed Jinja
environment, as transformers renders chat templates. Run by tests/contract/test_gpu_recipe_args.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: (messages, template variables) rendered through every chat template a recipe names.
SAMPLES: list[tuple[list[dict[str, str]], dict[str, Any]]] = [
    ([{"role": "query", "content": "capital of France?"}, {"role": "document", "content": "Paris."}], {}),
    (
        [{"role": "query", "content": "capital of France?"}, {"role": "document", "content": "Paris."}],
        {"instruction": "Judge relevance for a geography quiz"},
    ),
    (
        [
            {"role": "system", "content": "Rank passages about cities"},
            {"role": "query", "content": "capital of France?"},
            {"role": "document", "content": "Paris."},
        ],
        {},
    ),
]


def serve_parser() -> Any:
    """The ``vllm`` command-line parser with its ``serve`` subcommand, as vLLM's CLI builds it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    return parser


def check_args(parser: Any, recipe: dict[str, Any]) -> str | None:
    """None when vLLM accepts the recipe's command line, else vLLM's error message."""
    from vllm.entrypoints.cli.serve import validate_parsed_serve_args

    args = [arg.replace("{templates}", str(HERE / "templates")) for arg in recipe["args"]]
    argv = ["serve", recipe["model"], "--served-model-name", recipe["name"], *args]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            namespace = parser.parse_args(argv)
            validate_parsed_serve_args(namespace)
    except SystemExit:
        return stderr.getvalue().strip() or "refused"
    except Exception as error:  # vLLM's validation raises plain exceptions
        return f"{type(error).__name__}: {error}"
    return None


def render_templates(recipe: dict[str, Any]) -> dict[str, list[str]]:
    """Each chat template the recipe names -> its renderings of SAMPLES."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    args = recipe["args"]
    paths = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--chat-template"]
    rendered = {}
    for raw in paths:
        path = Path(raw.replace("{templates}", str(HERE / "templates")))
        template = env.from_string(path.read_text())
        rendered[path.name] = [
            template.render(messages=messages, add_generation_prompt=True, **variables)
            for messages, variables in SAMPLES
        ]
    return rendered


def main() -> int:
    import vllm

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "gpu-recipes.json"
    recipes = json.loads(path.read_text())["recipes"]
    parser = serve_parser()
    report = {
        "vllm": vllm.__version__,
        "recipes": {
            recipe["name"]: {"error": check_args(parser, recipe), "templates": render_templates(recipe)}
            for recipe in recipes
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
