"""Adapters that plug the SDK into RAG frameworks (``docs/integrations.md``).

- :mod:`vllm_tasks.integrations.langchain` (``pip install "vllm-tasks[langchain]"``): ``VLLMEmbeddings``,
  ``VLLMReranker``, ``VLLMOCRLoader``, ``VLLMTranscriptLoader``.
- :mod:`vllm_tasks.integrations.llama_index` (``pip install "vllm-tasks[llama-index]"``):
  ``VLLMEmbedding``, ``VLLMRerank``.
- :mod:`vllm_tasks.integrations.ray` (``pip install "vllm-tasks[ray]"`` for Ray Data itself): ``Embedder``,
  ``Scorer``, ``Transcriber``, ``OCR``, callable classes for ``ray.data.Dataset.map_batches``; they
  import nothing from Ray.
- :mod:`vllm_tasks.integrations.daft` (``pip install "vllm-tasks[daft]"``): ``VLLMProvider`` for
  ``daft.functions.embed_text`` / ``embed_image``, and the ``@daft.cls`` classes ``Scorer``, ``Transcriber``,
  ``OCR``.

Importing this package imports no framework; importing the LangChain, LlamaIndex or Daft module without its
framework raises :class:`vllm_tasks.MissingDependency` naming the extra to install.
"""
