"""Adapters that plug the SDK into RAG frameworks (``docs/integrations.md``).

- :mod:`vllm_tasks.integrations.langchain` (``pip install "vllm-tasks[langchain]"``): ``VLLMEmbeddings``,
  ``VLLMReranker``, ``VLLMOCRLoader``, ``VLLMTranscriptLoader``.
- :mod:`vllm_tasks.integrations.llama_index` (``pip install "vllm-tasks[llama-index]"``):
  ``VLLMEmbedding``, ``VLLMRerank``.

Importing this package imports neither framework; importing an adapter module without its framework
raises :class:`vllm_tasks.MissingDependency` naming the extra to install.
"""
