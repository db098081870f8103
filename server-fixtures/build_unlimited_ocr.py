"""Unlimited-OCR, tiny: baidu/Unlimited-OCR's ``UnlimitedOCRForCausalLM`` (vLLM 0.32: DeepSeek-OCR's vision
stack and processor, up to 32 crops, a DeepSeek-V2 MoE language model with plain attention) with the ``ocr``
fixture's tiny language model and tokenizer (build_ocr.py) and no weights.

Run through ``build_models.py`` with the fixture venv's python; served with ``--load-format dummy``. The
vision towers (SAM ViT-B, CLIP-L) are fixed at their real size in vLLM's code, and no transformers class
reads these weights (transformers 5.19 has neither DeepSeek-OCR nor Unlimited-OCR; the model's own code is
remote code on the Hugging Face hub): the fixture proves the request path (prompt, flags, the n-gram
processor), not the numbers. Its language model is the ``ocr`` fixture's, already the MoE with plain attention
(``use_mla: false``) that Unlimited-OCR uses.
"""

from __future__ import annotations

import json
from pathlib import Path


def build(out: Path) -> None:
    """The ``ocr`` fixture's directory with Unlimited-OCR's architecture and ``model_type``."""
    from build_ocr import build_deepseek_ocr_tiny

    build_deepseek_ocr_tiny(out)
    config = json.loads((out / "config.json").read_text())
    config.update(architectures=["UnlimitedOCRForCausalLM"], model_type="unlimited-ocr")
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {
                "note": "test fixture: UnlimitedOCRForCausalLM with a tiny language model and no weights; "
                "serve with --load-format dummy. Output text is meaningless; the request path is real."
            }
        )
    )
