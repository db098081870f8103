"""LightOnOCR-2, tiny and seeded: a transformers ``LightOnOcrForConditionalGeneration`` checkpoint (Pixtral
vision encoder, patch-merging projector, Qwen3 LM) that vLLM serves with its own
``LightOnOCRForConditionalGeneration`` on ``/v1/chat/completions``.

Run through ``build_models.py`` with the fixture venv's python, with PyPI's torchvision (without its compiled
parts) importable: transformers' PixtralProcessor exists only with torchvision. vLLM's class (through
Mistral-3 and Pixtral) imports torchvision too: the fixture serves it with the same torchvision on the path
(without torchvision vLLM falls back to its Transformers backend). The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, image patches and decoding equal
transformers' on the same weights (``references.py``'s ``ocr_chat``).

The tokenizer is build_qwen3_asr's WordPiece recipe with Qwen3's vocabulary size and the chat and vision
tokens at their real ids; the chat template is ChatML with an image part rendered as ``<|image_pad|>``, which
vLLM and transformers' LightOnOcrProcessor both expand to one image token per merged patch (no row breaks).
"""

from __future__ import annotations

import json
from pathlib import Path

#: Qwen3's vocabulary size and the ids of the tokens LightOnOCR's template and processor use.
VOCAB_SIZE = 151936
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
}
#: The tokenizer attributes LightOnOcrProcessor reads.
EXTRA_SPECIAL_TOKENS = {
    "image_token": "<|image_pad|>",
    "image_break_token": "<|vision_pad|>",
    "image_end_token": "<|vision_end|>",
}
#: ChatML; the parts of a turn in order, an image as ``<|image_pad|>``.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{- '<|image_pad|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
#: The image processor's longest side and the vision config's image_size: the release's 1540 px; 224 keeps
#: vLLM's dummy image (its largest) at 64 image tokens, within the fixture's small context.
LONGEST_EDGE = 224
SEED = 9
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow the image.
WEIGHT_SCALE = 5.0


def build(out: Path) -> None:
    """``LightOnOcrForConditionalGeneration``: Pixtral vision encoder of width 64 (1 layer, 2 heads, head_dim
    32, patch 14), merge 2, Qwen3 LM of width 64 (2 layers, head_dim 32, tied embeddings), weights from seed
    ``SEED`` with every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and
    ``PixtralProcessor(PixtralImageProcessorPil(longest_edge=LONGEST_EDGE))`` beside them."""
    from build_qwen2_5_vl import use_pure_torchvision

    use_pure_torchvision()
    from build_qwen2_5_vl import save_scaled_random
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        LightOnOcrConfig,
        LightOnOcrForConditionalGeneration,
        PixtralImageProcessorPil,
        PixtralProcessor,
        PreTrainedTokenizerFast,
    )

    config = LightOnOcrConfig(
        vision_config={
            "model_type": "pixtral",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "head_dim": 32,
            "patch_size": 14,
            "image_size": LONGEST_EDGE,  # vLLM sizes its dummy (largest) image by it, as the processor's edge
            "hidden_act": "silu",
            "rope_theta": 10000.0,
        },
        text_config={
            "model_type": "qwen3",
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,  # the smallest head size vLLM's CPU attention takes
            "max_position_embeddings": 4096,
            "tie_word_embeddings": True,
            "eos_token_id": SPECIAL_IDS["<|im_end|>"],
        },
        image_token_id=SPECIAL_IDS["<|image_pad|>"],
        spatial_merge_size=2,
    )
    save_scaled_random(LightOnOcrForConditionalGeneration, config, out, seed=SEED, scale=WEIGHT_SCALE)
    # The release's config is a Mistral-3 config naming vLLM's class (vLLM's LightOnOCR checks its type);
    # transformers reads it with LightOnOcrConfig (references.py names the class).
    saved = json.loads((out / "config.json").read_text())
    saved.update(
        model_type="mistral3",
        architectures=["LightOnOCRForConditionalGeneration"],
        image_token_index=SPECIAL_IDS["<|image_pad|>"],
        projector_hidden_act="gelu",
        vision_feature_layer=-1,
        multimodal_projector_bias=False,
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
    image_processor = PixtralImageProcessorPil(size={"longest_edge": LONGEST_EDGE}, patch_size=14)
    # The release's processor files name PixtralProcessor with the Qwen vision tokens (vLLM's LightOnOCR loads
    # a PixtralProcessor); transformers' LightOnOcrProcessor reads the same files (references.py names it).
    PixtralProcessor(
        image_processor,
        tokenizer,
        patch_size=14,
        spatial_merge_size=2,
        chat_template=CHAT_TEMPLATE,
        **EXTRA_SPECIAL_TOKENS,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: LightOnOCR layout, random weights (seed {SEED}); text is noise"})
    )
