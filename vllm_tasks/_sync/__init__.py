# GENERATED from vllm_tasks/_async/__init__.py by scripts/unasync.py: do not edit.
"""The synchronous client, written once; ``vllm_tasks/_sync/`` is generated from it (scripts/unasync.py).

Each task family is a mixin in its own module (``embeddings.py``, ...) over ``ClientBase``;
``client.py`` composes them into ``Client``.
"""
