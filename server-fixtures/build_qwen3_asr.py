"""Qwen3-ASR, tiny and seeded: a transformers-native ``Qwen3ASRForConditionalGeneration`` checkpoint that vLLM
serves as ``Qwen3ASRForConditionalGeneration`` (``/v1/audio/transcriptions``) or, with the architecture
overridden, as ``Qwen3ASRRealtimeGeneration`` (also ``/v1/realtime``).

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights, so it
carries no meaning; what the fixture proves is that vLLM's prompt, audio features and decoding equal
transformers' on the same weights (``references.py``'s ``qwen3_asr``).

The tokenizer is a WordPiece over MiniLM's English words (as build_zoo.py's Qwen3 tokenizer), filler entries
up to Qwen3-ASR's vocabulary size, and the chat, audio and ASR tokens at their real ids.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Qwen3-ASR's vocabulary size (its text config) and the ids of the tokens its prompt and processor use.
VOCAB_SIZE = 151936
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|audio_start|>": 151669,
    "<|audio_end|>": 151670,
    "<|audio_pad|>": 151676,
    "<asr_text>": 151704,
    "<timestamp>": 151705,
}
#: The tokenizer attributes Qwen3ASRProcessor reads.
EXTRA_SPECIAL_TOKENS = {
    "audio_token": "<|audio_pad|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}
#: ChatML with an audio part rendered as vLLM's placeholder (``<|audio_start|><|audio_pad|><|audio_end|>``):
#: the prompt transformers' ``apply_transcription_request`` builds is the one vLLM's ``get_generation_prompt``
#: writes (a system turn only when a prompt is given, the language forced in the assistant turn).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'audio' -%}{{- '<|audio_start|><|audio_pad|><|audio_end|>' -}}"
    "{%- elif part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
SEED = 7
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: audio; larger weights make the greedy output follow the audio.
WEIGHT_SCALE = 5.0


def write_tokenizer(
    out: Path,
    *,
    vocab_size: int = VOCAB_SIZE,
    special_ids: dict[str, int] = SPECIAL_IDS,
    extra_special_tokens: dict[str, str] = EXTRA_SPECIAL_TOKENS,
    chat_template: str = CHAT_TEMPLATE,
    pad_token: str = "<|endoftext|>",
    eos_token: str = "<|im_end|>",
) -> None:
    """A WordPiece tokenizer over MiniLM's English words, filler entries up to ``vocab_size`` and the
    ``special_ids`` at their ids (Qwen3-ASR's by default; other speech builders pass their model's)."""
    from build_zoo import _minilm_vocab
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = _minilm_vocab()
    by_id = {i: token for token, i in special_ids.items()}
    vocab = {word: i for i, word in enumerate(words) if i not in by_id}
    for i in range(len(words), vocab_size):
        vocab[by_id.get(i, f"<|filler_{i}|>")] = i
    for i, token in by_id.items():
        vocab[token] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_ids])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token=pad_token,
        eos_token=eos_token,
        model_max_length=32768,
        extra_special_tokens=extra_special_tokens,
        chat_template=chat_template,
    )
    fast.save_pretrained(str(out))


def build(out: Path) -> None:
    """``Qwen3ASRForConditionalGeneration``: audio encoder of width 64 (1 layer, 128 mels, downsampling
    stack of width 32), Qwen3 LM of width 64 (2 layers, head_dim 32, tied embeddings), weights from seed
    ``SEED`` with every 2-D weight times ``WEIGHT_SCALE``; the tokenizer and
    ``Qwen3ASRProcessor(Qwen3ASRFeatureExtractor())`` beside them."""
    import torch
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )

    config = Qwen3ASRConfig(
        audio_config={
            "d_model": 64,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 128,
            "num_mel_bins": 128,
            "downsample_hidden_size": 32,
            "output_dim": 64,
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
            "tie_word_embeddings": True,
        },
        audio_token_id=SPECIAL_IDS["<|audio_pad|>"],
        timestamp_token_id=SPECIAL_IDS["<timestamp>"],
        pad_token_id=SPECIAL_IDS["<|im_end|>"],
        eos_token_id=[SPECIAL_IDS["<|endoftext|>"], SPECIAL_IDS["<|im_end|>"]],
        architectures=["Qwen3ASRForConditionalGeneration"],
    )
    torch.manual_seed(SEED)
    model = Qwen3ASRForConditionalGeneration(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2:
                param.mul_(WEIGHT_SCALE)
    model.save_pretrained(str(out), safe_serialization=True)
    write_tokenizer(out)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(out))
    Qwen3ASRProcessor(Qwen3ASRFeatureExtractor(), tokenizer, chat_template=CHAT_TEMPLATE).save_pretrained(
        str(out)
    )
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: Qwen3-ASR layout, random weights (seed {SEED}); text is noise"})
    )
