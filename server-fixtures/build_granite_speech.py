"""Granite Speech, tiny and seeded: a transformers ``GraniteSpeechForConditionalGeneration`` checkpoint
(conformer encoder, Q-Former projector, Granite LM) that vLLM serves on ``/v1/audio/transcriptions`` and
``/v1/audio/translations``.

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, audio features and decoding equal
transformers' on the same weights (``references.py``'s ``granite_speech``).

The tokenizer is build_qwen3_asr's WordPiece recipe with Granite's vocabulary size, its role tokens and
``<|audio|>`` at their real ids, and Granite's chat template without its default system turn.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: transformers' Granite Speech feature extractor needs torchaudio, which the fixture venv lacks (PyPI's
#: wheel is built for CUDA torch); the stand-in provides its ``MelSpectrogram`` (see its README).
TORCHAUDIO_STANDIN = Path(__file__).resolve().parent / "torchaudio_standin"


def use_torchaudio_standin() -> None:
    """Put the torchaudio stand-in first on this process's path (before transformers looks for torchaudio)."""
    if str(TORCHAUDIO_STANDIN) not in sys.path:
        sys.path.insert(0, str(TORCHAUDIO_STANDIN))


#: granite-speech-3.3's vocabulary size and the ids of the tokens its chat template and processor use.
VOCAB_SIZE = 49160
SPECIAL_IDS: dict[str, int] = {
    "<|end_of_text|>": 0,
    "<|start_of_role|>": 49152,
    "<|end_of_role|>": 49153,
    "<|tool_call|>": 49154,
    "<|audio|>": 49155,
}
#: Granite's chat template for string contents, without the system turn the release adds by default.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' -}}"
    "{{- message['content'] + '<|end_of_text|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_of_role|>assistant<|end_of_role|>' -}}{%- endif -%}"
)
SEED = 11
#: Every 2-D weight multiplied by this, so that the greedy output follows the audio (see build_qwen3_asr).
WEIGHT_SCALE = 5.0


#: transformers' module names -> the release's checkpoint names (what vLLM's loader and transformers' own
#: conversion mapping read).
RELEASE_PREFIXES = (
    ("model.language_model.", "language_model.model."),
    ("model.encoder.", "encoder."),
    ("model.projector.", "projector."),
)


def save_release_weights(model: Any, out: Path, prefixes: tuple[tuple[str, str], ...]) -> None:
    """Write ``model``'s weights to ``out/model.safetensors`` under the release's names (each ``prefixes``
    pair renames one module), leaving out the LM head tied to the token embeddings. transformers 5.19's
    ``save_pretrained`` writes the language model of these models as ``language_model.model.model.*``,
    which vLLM refuses ("There is no module or parameter named 'model'")."""
    from safetensors.torch import save_file

    state = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight":
            continue
        source, target = next(((s, t) for s, t in prefixes if name.startswith(s)), ("", ""))
        if not source:
            raise ValueError(f"no release name for weight {name}")
        state[target + name[len(source) :]] = tensor.contiguous()
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})


def build(out: Path) -> None:
    """``GraniteSpeechForConditionalGeneration``: conformer encoder of width 64 (1 layer, 80 mels stacked by
    two), a 1-layer Q-Former of width 64 (windows of 15 frames, 3 queries each), a Granite LM of width 64
    (2 layers, head_dim 32, tied embeddings), weights from seed ``SEED`` with every 2-D weight times
    ``WEIGHT_SCALE``; the tokenizer and ``GraniteSpeechProcessor`` beside them."""
    use_torchaudio_standin()
    import torch
    from build_qwen3_asr import write_tokenizer
    from transformers import (
        GraniteSpeechConfig,
        GraniteSpeechFeatureExtractor,
        GraniteSpeechForConditionalGeneration,
        GraniteSpeechProcessor,
        PreTrainedTokenizerFast,
    )

    config = GraniteSpeechConfig(
        encoder_config={
            "input_dim": 160,
            "num_layers": 1,
            "hidden_dim": 64,
            "feedforward_mult": 2,
            "num_heads": 2,
            "dim_head": 32,
            "output_dim": 42,
            "context_size": 200,
            "max_pos_emb": 512,
            "conv_kernel_size": 15,
            "conv_expansion_factor": 2,
        },
        projector_config={
            "model_type": "blip_2_qformer",
            "hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 128,
            "encoder_hidden_size": 64,
            "cross_attention_frequency": 1,
            "max_position_embeddings": 2048,
        },
        text_config={
            "model_type": "granite",
            "vocab_size": VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": True,
            "bos_token_id": 0,
            "eos_token_id": 0,
            "pad_token_id": 0,
        },
        audio_token_index=SPECIAL_IDS["<|audio|>"],
        downsample_rate=5,
        window_size=15,
        has_lora_adapter=False,
        architectures=["GraniteSpeechForConditionalGeneration"],
    )
    torch.manual_seed(SEED)
    model = GraniteSpeechForConditionalGeneration(config).eval()
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
        extra_special_tokens={"audio_token": "<|audio|>"},
        chat_template=CHAT_TEMPLATE,
        pad_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
    )
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    GraniteSpeechProcessor(
        GraniteSpeechFeatureExtractor(), tokenizer, chat_template=CHAT_TEMPLATE
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": f"test fixture: Granite Speech layout, random weights (seed {SEED}); text is noise"}
        )
    )
