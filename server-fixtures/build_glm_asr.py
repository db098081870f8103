"""GLM-ASR, tiny and seeded: a transformers ``GlmAsrForConditionalGeneration`` checkpoint (Whisper-style
encoder with rotary attention, MLP projector, Llama LM) that vLLM serves on ``/v1/audio/transcriptions`` and
``/v1/audio/translations``.

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, audio features and decoding equal
transformers' on the same weights (``references.py``'s ``glm_asr``).

The tokenizer is build_qwen3_asr's WordPiece recipe with GLM-ASR's vocabulary size, GLM-4's chat tokens and
``<|pad|>`` (the audio token) at their ids in the release's config, and a GLM-4 chat template.
"""

from __future__ import annotations

import json
from pathlib import Path

#: GLM-ASR-Nano's vocabulary size and the ids of the tokens its chat template, processor and EOS use.
VOCAB_SIZE = 59264
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 59246,
    "[gMASK]": 59248,
    "<sop>": 59250,
    "<|system|>": 59252,
    "<|user|>": 59253,
    "<|assistant|>": 59254,
    "<|observation|>": 59255,
    "<|pad|>": 59260,
}
#: GLM-4's chat format for string contents (vLLM's ``get_generation_prompt`` sends one string user turn).
CHAT_TEMPLATE = (
    "[gMASK]<sop>"
    "{%- for message in messages -%}"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"
)
#: transformers' module names -> the release's checkpoint names (transformers' convert_glmasr_weights_to_hf.py
#: writes these; vLLM's loader reads them).
RELEASE_PREFIXES = (
    ("model.language_model.", "language_model.model."),
    ("model.audio_tower.", "audio_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
)
SEED = 2
#: Every 2-D weight multiplied by this, so that the greedy output follows the audio (at 5 this seed writes one
#: token over and over; at 10 the two recordings and the two tasks give four different texts).
WEIGHT_SCALE = 10.0


def build(out: Path) -> None:
    """``GlmAsrForConditionalGeneration``: encoder of width 64 (1 layer, 2 heads, 128 mels, MLP 256 = 4 x 64,
    which the projector reads after merging 4 frames), a Llama LM of width 64 (2 layers, head_dim 32, tied
    embeddings), weights from seed ``SEED`` with every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and
    ``GlmAsrProcessor(WhisperFeatureExtractor(feature_size=128))`` beside them."""
    import torch
    from build_granite_speech import save_release_weights
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        GlmAsrConfig,
        GlmAsrForConditionalGeneration,
        GlmAsrProcessor,
        PreTrainedTokenizerFast,
        WhisperFeatureExtractor,
    )

    eos = [SPECIAL_IDS["<|endoftext|>"], SPECIAL_IDS["<|user|>"], SPECIAL_IDS["<|observation|>"]]
    config = GlmAsrConfig(
        audio_config={
            "hidden_size": 64,
            "intermediate_size": 256,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_mel_bins": 128,
            "max_position_embeddings": 1500,
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
            "tie_word_embeddings": True,
            "eos_token_id": eos,
        },
        audio_token_id=SPECIAL_IDS["<|pad|>"],
        architectures=["GlmAsrForConditionalGeneration"],
    )
    torch.manual_seed(SEED)
    model = GlmAsrForConditionalGeneration(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(WEIGHT_SCALE)
    model.save_pretrained(str(out), safe_serialization=True)
    save_release_weights(model, out, RELEASE_PREFIXES)
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens={"audio_token": "<|pad|>"},
        chat_template=CHAT_TEMPLATE,
        pad_token="<|endoftext|>",
        eos_token="<|endoftext|>",
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    GlmAsrProcessor(
        WhisperFeatureExtractor(feature_size=128), tokenizer, chat_template=CHAT_TEMPLATE
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: GLM-ASR layout, random weights (seed {SEED}); noise text"})
    )
