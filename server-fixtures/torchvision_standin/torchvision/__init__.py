"""Minimal pure-torch torchvision stand-in for the vllm-tasks `ocr` CPU fixture (see ../README.md)."""

__version__ = "0.28.0+standin"

from . import io, transforms  # noqa: E402,F401
