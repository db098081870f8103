# GENERATED from vllm_tasks/_async/client.py by scripts/unasync.py: do not edit.
"""``Client``: every task family's methods over the shared core."""

from __future__ import annotations

from .base import ClientBase


class Client(ClientBase):
    __doc__ = ClientBase.__doc__
