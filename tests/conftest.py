"""Shared pytest configuration: registers the real-vLLM-server plugin from server-fixtures/.

Fixtures it provides (see server-fixtures/pytest_plugin.py), one per entry of fixture_table.FIXTURES:
vllm_embed, vllm_embed_mrl, vllm_rerank, vllm_api_key, vllm_late_interaction, vllm_ocr,
vllm_ocr_no_processor, vllm_stt -- each a VLLMServer with .name, .base_url, .model, .api_key (None unless
keyed).
Markers: integration, gpu.
"""

import sys
from pathlib import Path

_SERVER_FIXTURES = str(Path(__file__).resolve().parent.parent / "server-fixtures")
if _SERVER_FIXTURES not in sys.path:
    sys.path.insert(0, _SERVER_FIXTURES)

pytest_plugins = ["pytest_plugin"]
