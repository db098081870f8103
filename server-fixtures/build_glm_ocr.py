"""GLM-OCR, tiny and seeded: a transformers ``GlmOcrForConditionalGeneration`` checkpoint (CogViT-style vision
encoder, patch merger, GLM LM) that vLLM serves on ``/v1/chat/completions``.

Run through ``build_models.py`` with the fixture venv's python, with PyPI's torchvision (without its compiled
parts) importable: GLM-OCR's processor is ``Glm46VProcessor``, whose video processor exists only with
torchvision. The text comes out of random weights, so it carries no meaning; what the fixture proves is that
vLLM's prompt, image patches and decoding equal transformers' on the same weights (``references.py``'s
``ocr_chat``).

The tokenizer is build_qwen3_asr's WordPiece recipe with GLM-OCR's vocabulary size and GLM-4's chat and image
tokens at their real ids; the chat template renders GLM-4V's format (``[gMASK]<sop>``, ``<|user|>``, an
image as ``<|begin_of_image|><|image|><|end_of_image|>``, ``<|assistant|>``).
"""

from __future__ import annotations

import json
from pathlib import Path

from build_qwen2_5_vl import use_pure_torchvision

#: GLM-OCR's vocabulary size and the ids of the tokens its chat template, processor and EOS use.
VOCAB_SIZE = 59392
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 59246,
    "[gMASK]": 59248,
    "<sop>": 59250,
    "<|system|>": 59252,
    "<|user|>": 59253,
    "<|assistant|>": 59254,
    "<|observation|>": 59255,
    "<|begin_of_image|>": 59256,
    "<|end_of_image|>": 59257,
    "<|begin_of_video|>": 59258,
    "<|end_of_video|>": 59259,
    "<|image|>": 59280,
    "<|video|>": 59281,
}
#: GLM-4V's chat format: each turn ``<|role|>`` and a newline, a part list as its images and texts in order.
CHAT_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{- '<|begin_of_image|><|image|><|end_of_image|>' -}}"
    "{%- elif part['type'] == 'video' -%}{{- '<|begin_of_video|><|video|><|end_of_video|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"
)
#: Pixel bounds of the image processor (``smart_resize`` in 28-pixel steps): 16 to 256 image tokens.
MIN_PIXELS, MAX_PIXELS = 28 * 28 * 16, 28 * 28 * 256
SEED = 5
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow the image.
WEIGHT_SCALE = 5.0


def build(out: Path) -> None:
    """``GlmOcrForConditionalGeneration``: vision encoder of width 64 (1 layer, 2 heads, patch 14, merge 2,
    temporal patch 2), GLM LM of width 64 (2 layers, head_dim 32), weights from seed ``SEED`` with every 2-D
    weight times ``WEIGHT_SCALE``; the tokenizer and ``Glm46VProcessor`` (image and video processors) beside
    them."""
    use_pure_torchvision()
    from build_qwen2_5_vl import save_scaled_random
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        Glm46VImageProcessor,
        Glm46VProcessor,
        Glm46VVideoProcessor,
        GlmOcrConfig,
        GlmOcrForConditionalGeneration,
        PreTrainedTokenizerFast,
    )

    config = GlmOcrConfig(
        vision_config={
            "depth": 1,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
        },
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            # The vision merger's width: transformers makes it out_hidden_size x in_channels, vLLM 0.32 reads
            # the LM's intermediate_size; the release has both at 4608 (1536 x 3).
            "intermediate_size": 64 * 3,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,  # the smallest head size vLLM's CPU attention takes
            "max_position_embeddings": 4096,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [4, 6, 6],
                "partial_rotary_factor": 1.0,
            },
            "eos_token_id": [SPECIAL_IDS["<|endoftext|>"], SPECIAL_IDS["<|user|>"]],
        },
        architectures=["GlmOcrForConditionalGeneration"],
    )
    save_scaled_random(GlmOcrForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens={"image_token": "<|image|>", "video_token": "<|video|>"},
        chat_template=CHAT_TEMPLATE,
        eos_token="<|endoftext|>",
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    Glm46VProcessor(
        Glm46VImageProcessor(size=size, patch_size=14, merge_size=2, temporal_patch_size=2),
        tokenizer,
        Glm46VVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: GLM-OCR layout, random weights (seed {SEED}); text is noise"})
    )
