"""Qwen2.5-VL, tiny and seeded: a transformers ``Qwen2_5_VLForConditionalGeneration`` checkpoint (the
architecture olmOCR-2 and Nanonets-OCR2 fine-tune) that vLLM serves with its own ``qwen2_5_vl.py``.

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, image processing and decoding equal
transformers' on the same weights (``references.py``'s ``qwen2_5_vl``), for each OCR preset's request.

The tokenizer is build_qwen3_asr's recipe (MiniLM's words, fillers up to the vocabulary size) with the
Qwen2.5-VL chat and vision tokens at their real ids and Qwen2.5-VL's own chat template. The processor is
``Qwen2_5_VLProcessor`` with transformers' torchvision image and video processors (pure torchvision on the
path, ``fixture_table.PURE_TORCHVISION_ENV``), as vLLM loads them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fixture_table import pure_torchvision_dir

#: Qwen2.5-VL-3B's vocabulary size (Nanonets-OCR2-3B; the 7B olmOCR pads it to 152064) and the ids of the
#: tokens its chat template and processor use.
VOCAB_SIZE = 151936
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
}
EXTRA_SPECIAL_TOKENS = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"}
#: Qwen2.5-VL-Instruct's chat template (its chat_template.json): a default system turn, each image part as
#: ``<|vision_start|><|image_pad|><|vision_end|>`` where it stands among the text parts.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = "
    "video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: The image processor's pixel bounds: Qwen2.5-VL's minimum, and at most 256 image tokens (a 448x448 page)
#: instead of 16384, so that any page fits the fixture's small context.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 28 * 28 * 256
SEED = 11
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow it.
WEIGHT_SCALE = 5.0


def use_pure_torchvision() -> None:
    """Put the pure torchvision (``fixture_table.pure_torchvision_dir``) on this process's path, as the
    fixture's server has it, so that transformers picks the same torchvision image and video processors.
    transformers caches whether torchvision is importable; a check made before this call is forgotten."""
    if str(pure_torchvision_dir()) not in sys.path:
        sys.path.insert(0, str(pure_torchvision_dir()))
    import_utils = sys.modules.get("transformers.utils.import_utils")
    if import_utils is not None:
        import_utils.is_torchvision_available.cache_clear()
        import_utils.is_torchvision_v2_available.cache_clear()


def save_scaled_random(model_class: Any, config: Any, out: Path, *, seed: int, scale: float) -> None:
    """Save ``model_class(config)`` with random weights drawn after ``torch.manual_seed(seed)``, every 2-D
    weight multiplied by ``scale`` (at the default init a tiny model writes one constant token, whatever
    its input), as safetensors in ``out``."""
    import torch

    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(scale)
    model.save_pretrained(str(out), safe_serialization=True)


def build(out: Path) -> None:
    """``Qwen2_5_VLForConditionalGeneration``: vision tower of width 64 (1 block, full attention, patch 14,
    merge 2), Qwen2 LM of width 64 (2 layers, head_dim 32, M-RoPE sections 4/6/6), weights from seed
    ``SEED`` with every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and processor beside them."""
    use_pure_torchvision()
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    config = Qwen2_5_VLConfig(
        vision_config={
            "depth": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [0],
        },
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 6, 6]},
            "bos_token_id": SPECIAL_IDS["<|endoftext|>"],
            "eos_token_id": SPECIAL_IDS["<|im_end|>"],
        },
        image_token_id=SPECIAL_IDS["<|image_pad|>"],
        video_token_id=SPECIAL_IDS["<|video_pad|>"],
        vision_start_token_id=SPECIAL_IDS["<|vision_start|>"],
        vision_end_token_id=SPECIAL_IDS["<|vision_end|>"],
        tie_word_embeddings=False,
        architectures=["Qwen2_5_VLForConditionalGeneration"],
    )
    save_scaled_random(Qwen2_5_VLForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens=EXTRA_SPECIAL_TOKENS,
        chat_template=CHAT_TEMPLATE,
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: Qwen2.5-VL layout, random weights (seed {SEED}); text is noise"})
    )
