"""The asynchronous client, written once; ``vllm_tasks/_sync/`` is generated from it (scripts/unasync.py).

Each task family is a mixin in its own module (``embeddings.py``, ...) over ``AsyncClientBase``;
``client.py`` composes them into ``AsyncClient``.
"""
