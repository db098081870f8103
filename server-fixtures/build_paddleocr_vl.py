"""PaddleOCR-VL, tiny and seeded: a transformers ``PaddleOCRVLForConditionalGeneration`` checkpoint
(SigLIP-style NaViT vision encoder, 2x2 merging projector, Ernie-4.5 LM) that vLLM serves on
``/v1/chat/completions``.

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, image patches and decoding equal
transformers' on the same weights (``references.py``'s ``ocr_chat``).

transformers 5 saves the release's PaddlePaddle names (``mlp_AR.*``, ``visual.*``, ``model.*``), which vLLM
reads. The tokenizer is build_qwen3_asr's WordPiece recipe with Ernie-4.5's vocabulary size and the image and
sentence tokens at their real ids; the chat template renders the release's ``chat_template.jinja`` (images
first, then the text, ``User: ``/``Assistant: `` turns).
"""

from __future__ import annotations

import json
from pathlib import Path

#: Ernie-4.5's vocabulary size and the ids of the tokens PaddleOCR-VL's template and processor use.
VOCAB_SIZE = 103424
SPECIAL_IDS: dict[str, int] = {
    "<unk>": 0,
    "<s>": 1,
    "</s>": 2,
    "<|begin_of_sentence|>": 100273,
    "<|IMAGE_PLACEHOLDER|>": 100295,
    "<|IMAGE_START|>": 101305,
    "<|IMAGE_END|>": 101306,
}
#: The release's chat template, as it renders: the images of a user turn first, then its text, then a newline.
CHAT_TEMPLATE = (
    "{{- '<|begin_of_sentence|>' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{- 'User: ' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'image' -%}"
    "{{- '<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>' -}}{%- endif -%}{%- endfor -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}"
    "{{- part['text'] -}}{%- endif -%}{%- endfor -%}"
    "{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- 'Assistant: ' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}"
    "{{- part['text'] -}}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '</s>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant: ' -}}{%- endif -%}"
)
#: Pixel bounds of the image processor (``smart_resize`` in 28-pixel steps): 16 to 256 image tokens, so a
#: small page stays a short prompt on 2 cores (the release: 188 to 3600). Mean and std: the release's 0.5.
MIN_PIXELS, MAX_PIXELS = 28 * 28 * 16, 28 * 28 * 256
SEED = 3
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow the image.
WEIGHT_SCALE = 5.0


def build(out: Path) -> None:
    """``PaddleOCRVLForConditionalGeneration``: vision encoder of width 64 (1 layer, 2 heads, patch 14, merge
    2), Ernie-4.5 LM of width 64 (2 layers, head_dim 32, tied embeddings), weights from seed ``SEED`` with
    every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and ``PaddleOCRVLProcessor`` (its PIL image
    processor, no torchvision) beside them."""
    from build_qwen2_5_vl import save_scaled_random
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        PaddleOCRVLConfig,
        PaddleOCRVLForConditionalGeneration,
        PaddleOCRVLImageProcessorPil,
        PaddleOCRVLProcessor,
        PreTrainedTokenizerFast,
    )

    config = PaddleOCRVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 384,
            "patch_size": 14,
            "spatial_merge_size": 2,
        },
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,  # the smallest head size vLLM's CPU attention takes
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [4, 6, 6]},
        },
        image_token_id=SPECIAL_IDS["<|IMAGE_PLACEHOLDER|>"],
        vision_start_token_id=SPECIAL_IDS["<|IMAGE_START|>"],
        vision_end_token_id=SPECIAL_IDS["<|IMAGE_END|>"],
        architectures=["PaddleOCRVLForConditionalGeneration"],
    )
    save_scaled_random(PaddleOCRVLForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens={"image_token": "<|IMAGE_PLACEHOLDER|>"},
        chat_template=CHAT_TEMPLATE,
        pad_token="<unk>",
        eos_token="</s>",
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    image_processor = PaddleOCRVLImageProcessorPil(
        min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    PaddleOCRVLProcessor(image_processor, tokenizer, chat_template=CHAT_TEMPLATE).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": f"test fixture: PaddleOCR-VL layout, random weights (seed {SEED}); text is noise"}
        )
    )
