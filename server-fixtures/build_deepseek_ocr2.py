"""DeepSeek-OCR-2, tiny language model: ``DeepseekOCR2ForCausalLM`` (vLLM 0.32) with the ``ocr`` fixture's
tiny DeepSeek-V2 language model and tokenizer (build_ocr.py) and no weights, served with
``--load-format dummy``.

Run through ``build_models.py`` with the fixture venv's python. vLLM's ``deepseek_ocr2.py`` fixes both vision
towers at their real size in code (SAM ViT-B, 12 x 768, and ``build_qwen2_decoder_as_encoder()``, a Qwen2
decoder of 24 layers, 896 wide): ``config.json`` can only shrink the language model, and the projector reads
the encoder's 896-wide output. The fixture proves the request path (prompt, flags, the n-gram processor), not
the numbers; the comparison with transformers' ``deepseek_ocr2`` on real-size random weights is
``server-fixtures/check_deepseek_ocr2.py``, outside the test suite (its costs are in its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path

#: The width of vLLM's Qwen2 decoder-as-encoder, which the projector reads.
ENCODER_WIDTH = 896


def build(out: Path) -> None:
    """The ``ocr`` fixture's directory with DeepSeek-OCR-2's architecture and projector input."""
    from build_ocr import build_deepseek_ocr_tiny

    build_deepseek_ocr_tiny(out)
    config = json.loads((out / "config.json").read_text())
    config["architectures"] = ["DeepseekOCR2ForCausalLM"]
    config["projector_config"]["input_dim"] = ENCODER_WIDTH
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {
                "note": "test fixture: DeepseekOCR2ForCausalLM with a tiny language model and no weights; "
                "serve with --load-format dummy. Output text is meaningless; the request path is real."
            }
        )
    )
