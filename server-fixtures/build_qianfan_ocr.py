"""Qianfan-OCR, tiny and seeded: a transformers ``QianfanOCRForConditionalGeneration`` checkpoint (InternViT,
pixel-shuffle projector, Qwen3 LM) that vLLM serves with its own ``qianfan_ocr.py`` (an
``InternVLChatModel``).

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, image processing and decoding equal
transformers' on the same weights (``references.py``'s ``qianfan_ocr``).

transformers saves the weights under the original InternVL names (``vision_model.*``, ``mlp1.*``,
``language_model.*``: its conversion mapping reversed), which vLLM's InternVL loader reads. vLLM also reads
the InternVL chat-model keys of ``config.json`` (``force_image_size``, ``select_layer``, ``ps_version``, the
dynamic-tiling bounds, the vision tower's ``qkv_bias``/``qk_normalization``), written here beside
transformers' own. One tile of 224x224 per image (``max_dynamic_patch`` 1), so that an image of that size is
not resized on either side: vLLM's InternVL processor resizes with PIL, transformers' GotOcr2 processor with
torchvision.

The tokenizer is build_qwen3_asr's recipe with the ChatML and InternVL image tokens at their ids; the chat
template is ChatML with an image part written ``<image>\\n`` (the placeholder both processors expand to
``<img>``, 64 ``<IMG_CONTEXT>``, ``</img>``).
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 151936
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<img>": 151665,
    "</img>": 151666,
    "<IMG_CONTEXT>": 151667,
}
#: The tokenizer attributes QianfanOCRProcessor reads.
EXTRA_SPECIAL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
}
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}{{- '<image>\\n' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
IMAGE_SIZE, PATCH_SIZE = 224, 14
#: Image tokens per tile: (224 / 14)^2 patches, pixel-shuffled by 0.5 in each direction.
IMAGE_SEQ_LENGTH = (IMAGE_SIZE // PATCH_SIZE) ** 2 // 4
SEED = 17
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow it.
WEIGHT_SCALE = 5.0


def _fix_language_model_names(path: Path) -> None:
    """transformers 5.19 reverses its ``encoder.layers.`` -> ``layers.`` renaming (meant for the vision tower)
    on the language model's keys too, writing ``language_model.model.encoder.layers.N``; the original
    checkpoints, vLLM and transformers' own loading use ``language_model.model.layers.N``."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    fixed = {
        k.replace("language_model.model.encoder.layers.", "language_model.model.layers."): v
        for k, v in tensors.items()
    }
    save_file(fixed, str(path), metadata={"format": "pt"})


def build(out: Path) -> None:
    """``QianfanOCRForConditionalGeneration``: InternViT of width 64 (1 layer, 224 px tiles, patch 14),
    Qwen3 LM of width 64 (2 layers, head_dim 32), weights from seed ``SEED`` with every 2-D weight times
    ``WEIGHT_SCALE``; the tokenizer and processor beside them."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from build_qwen2_5_vl import save_scaled_random
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        GotOcr2ImageProcessor,
        PreTrainedTokenizerFast,
        QianfanOCRConfig,
        QianfanOCRForConditionalGeneration,
        QianfanOCRProcessor,
    )

    config = QianfanOCRConfig(
        vision_config={
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": [IMAGE_SIZE, IMAGE_SIZE],
            "patch_size": [PATCH_SIZE, PATCH_SIZE],
            "attention_bias": True,
            "use_qk_norm": False,
            "drop_path_rate": 0.0,
        },
        text_config={
            "model_type": "qwen3",
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "bos_token_id": SPECIAL_IDS["<|endoftext|>"],
            "eos_token_id": SPECIAL_IDS["<|im_end|>"],
        },
        image_token_id=SPECIAL_IDS["<IMG_CONTEXT>"],
        image_seq_length=IMAGE_SEQ_LENGTH,
        downsample_ratio=0.5,
        architectures=["QianfanOCRForConditionalGeneration"],
    )
    save_scaled_random(QianfanOCRForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    _fix_language_model_names(out / "model.safetensors")
    saved = json.loads((out / "config.json").read_text())
    saved.update(
        force_image_size=IMAGE_SIZE,
        select_layer=-1,
        ps_version="v2",
        dynamic_image_size=True,
        min_dynamic_patch=1,
        max_dynamic_patch=1,
        use_thumbnail=True,
    )
    saved["vision_config"].update(
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        qkv_bias=True,
        qk_normalization=False,
        norm_type="layer_norm",
        initializer_factor=1.0,
    )
    (out / "config.json").write_text(json.dumps(saved, indent=2))
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens=EXTRA_SPECIAL_TOKENS,
        chat_template=CHAT_TEMPLATE,
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    QianfanOCRProcessor(
        image_processor=GotOcr2ImageProcessor(
            size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
            crop_to_patches=True,
            min_patches=1,
            max_patches=1,
            image_mean=[0.485, 0.456, 0.406],
            image_std=[0.229, 0.224, 0.225],
        ),
        tokenizer=tokenizer,
        image_seq_length=IMAGE_SEQ_LENGTH,
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: Qianfan-OCR layout, random weights (seed {SEED}); text is noise"})
    )
