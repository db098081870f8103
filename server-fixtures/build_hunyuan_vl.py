"""HunyuanOCR, tiny and seeded: a transformers ``HunYuanVLForConditionalGeneration`` checkpoint, which vLLM
0.32 serves through its Transformers backend (its registry maps the architecture to
``TransformersMultiModalForCausalLM``; vLLM has no HunYuanVL class of its own).

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, image processing and decoding equal
transformers' on the same weights (``references.py``'s ``hunyuan_vl``).

The tokenizer is build_qwen3_asr's recipe with HunyuanOCR's special tokens at their ids
(``<｜hy_place▁holder▁no▁N｜>`` is id 120018 + N: the image start/end/placeholder/newline ids
120118-120121 of ``HunYuanVLConfig`` and the end token 120020). The chat template renders the prompt
vLLM's own HunyuanOCR example writes (examples/offline_inference/vision_language.py, ``run_hunyuan_vl``:
begin-of-sentence, image, question, ``<｜hy_User｜>``), a system turn (the recipe sends an empty one)
followed by ``<｜hy_place▁holder▁no▁3｜>``. HunyuanOCR's own chat template was not available here: the
fixture proves vLLM and transformers agree on this one.
"""

from __future__ import annotations

import json
from pathlib import Path

#: HunyuanOCR's vocabulary size and the ids of the tokens its chat template and processor use.
VOCAB_SIZE = 120818
BOS, EOS, PAD = "<｜hy_begin▁of▁sentence｜>", "<｜hy_place▁holder▁no▁2｜>", "<｜hy_▁pad▁｜>"
USER, ASSISTANT = "<｜hy_User｜>", "<｜hy_Assistant｜>"
SYSTEM_END = "<｜hy_place▁holder▁no▁3｜>"
IMAGE_START, IMAGE_END = "<｜hy_place▁holder▁no▁100｜>", "<｜hy_place▁holder▁no▁101｜>"
IMAGE, IMAGE_NEWLINE = "<｜hy_place▁holder▁no▁102｜>", "<｜hy_place▁holder▁no▁103｜>"
SPECIAL_IDS: dict[str, int] = {
    BOS: 120000,
    PAD: 120002,
    USER: 120006,
    ASSISTANT: 120007,
    EOS: 120020,
    SYSTEM_END: 120021,
    IMAGE_START: 120118,
    IMAGE_END: 120119,
    IMAGE: 120120,
    IMAGE_NEWLINE: 120121,
}
#: The tokenizer attributes HunYuanVLProcessor reads.
EXTRA_SPECIAL_TOKENS = {"image_token": IMAGE, "image_start_token": IMAGE_START, "image_end_token": IMAGE_END}
#: Each message's content is a string or a list of parts (vLLM sends every message's content as parts when
#: the template loops over parts).
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}"
    "{{- '" + IMAGE_START + IMAGE + IMAGE_END + "' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'system' -%}{{- '" + SYSTEM_END + "' -}}"
    "{%- elif message['role'] == 'user' -%}{{- '" + USER + "' -}}"
    "{%- elif message['role'] == 'assistant' -%}{{- '" + EOS + "' -}}{%- endif -%}"
    "{%- endfor -%}"
)
#: The image processor's pixel bounds: at least 128x128 and at most 448x448 (HunyuanOCR's are 512x512 and
#: 2048x2048), so that a test page is a few dozen image tokens.
MIN_PIXELS, MAX_PIXELS = 128 * 128, 448 * 448
SEED = 13
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow it.
WEIGHT_SCALE = 5.0


def build(out: Path) -> None:
    """``HunYuanVLForConditionalGeneration``: vision tower of width 64 (1 layer, patch 16, merge 2), HunYuan
    dense LM of width 64 (2 layers, head_dim 32, HunyuanOCR's xdrope with four sections of 4), weights from
    seed ``SEED`` with every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and processor beside them."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from build_qwen2_5_vl import save_scaled_random
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        HunYuanVLConfig,
        HunYuanVLForConditionalGeneration,
        HunYuanVLImageProcessor,
        HunYuanVLProcessor,
        PreTrainedTokenizerFast,
    )

    config = HunYuanVLConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "out_hidden_size": 64,
            "max_image_size": 512,
        },
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "max_position_embeddings": 4096,
            "rope_parameters": {
                "rope_type": "xdrope",
                "rope_theta": 10000.0,
                "alpha": 1000.0,
                "factor": 1.0,
                "xdrope_section": [4, 4, 4, 4],
            },
            "bos_token_id": SPECIAL_IDS[BOS],
            "eos_token_id": SPECIAL_IDS[EOS],
            "pad_token_id": SPECIAL_IDS[PAD],
            "tie_word_embeddings": True,
        },
        image_token_id=SPECIAL_IDS[IMAGE],
        im_start_id=SPECIAL_IDS[IMAGE_START],
        im_end_id=SPECIAL_IDS[IMAGE_END],
        im_newline_id=SPECIAL_IDS[IMAGE_NEWLINE],
        architectures=["HunYuanVLForConditionalGeneration"],
    )
    save_scaled_random(HunYuanVLForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens=EXTRA_SPECIAL_TOKENS,
        chat_template=CHAT_TEMPLATE,
        pad_token=PAD,
        eos_token=EOS,
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out), bos_token=BOS)
    tokenizer.save_pretrained(str(out))
    HunYuanVLProcessor(
        image_processor=HunYuanVLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: HunyuanOCR layout, random weights (seed {SEED}); text is noise"})
    )
