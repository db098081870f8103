"""``AsyncClient``: every task family's methods over the shared core."""

from __future__ import annotations

from .base import AsyncClientBase


class AsyncClient(AsyncClientBase):
    __doc__ = AsyncClientBase.__doc__
