"""Qwen3-ForcedAligner, tiny: the word-timestamp model vLLM serves on ``/pooling`` (``token_classify``).

Run through ``build_models.py`` with the fixture venv's python. The checkpoint has the real release's layout
(``Qwen/Qwen3-ForcedAligner-0.6B``): ``config.json`` with ``model_type: qwen3_asr``, a ``thinker_config``
(audio encoder, Qwen3 text model, ``classify_num`` time classes) and ``timestamp_token_id`` /
``timestamp_segment_time``; weights named ``thinker.audio_tower.*``, ``thinker.model.*`` and
``thinker.lm_head.weight`` (the ``[classify_num, hidden]`` classifier), which is what vLLM 0.32's
``Qwen3ASRForcedAlignerForTokenClassification.hf_to_vllm_mapper`` reads. The weights come from transformers'
``Qwen3ASRForTokenClassification`` (seed 15, every 2-D weight times 5 so that the argmax moves with the
input), and :func:`transformers_model` loads them back into it for the reference (``references.py``).

The tokenizer is ``build_zoo``'s MiniLM-words-plus-Qwen-ids recipe with the ids the aligner needs
(``<|audio_start|>`` 151669, ``<|audio_end|>`` 151670, ``<|audio_pad|>`` 151676, ``<timestamp>`` 151705).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
TIMESTAMP_TOKEN_ID = SPECIAL_IDS["<timestamp>"]
#: Milliseconds per time class (the release's value).
TIMESTAMP_SEGMENT_TIME = 80
#: Time classes: 3.2 s at 80 ms (the release has 5000, 400 s): every time the tiny model names falls inside
#: the test recordings (3.8 s and 6.6 s), so no cap at the audio's end hides a difference.
CLASSIFY_NUM = 40
SEED = 15
WEIGHT_SCALE = 5.0

AUDIO_CONFIG: dict[str, Any] = {
    "num_mel_bins": 128,
    "encoder_layers": 1,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 128,
    "d_model": 64,
    "output_dim": 64,
    "downsample_hidden_size": 32,
    "n_window": 50,
    "n_window_infer": 800,
    "max_source_positions": 1500,
}
TEXT_CONFIG: dict[str, Any] = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
}

#: Qwen3-ASR's chat turn (what the release's tokenizer carries); the aligner's own prompt is sent raw by
#: the client (``chat_template`` in the request, ``--trust-request-chat-template`` on the server).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'audio' %}"
    "<|audio_start|><|audio_pad|><|audio_end|>{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer() -> Any:
    """MiniLM's WordPiece words at 0..30521, fillers up to ``VOCAB_SIZE``, the special ids above."""
    from build_zoo import _minilm_vocab
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = _minilm_vocab()
    vocab = {word: i for i, word in enumerate(words)}
    by_id = {i: token for token, i in SPECIAL_IDS.items()}
    for i in range(len(words), VOCAB_SIZE):
        vocab[by_id.get(i, f"<|filler_{i}|>")] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_IDS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        model_max_length=32768,
        extra_special_tokens={
            "audio_token": "<|audio_pad|>",
            "audio_bos_token": "<|audio_start|>",
            "audio_eos_token": "<|audio_end|>",
        },
    )


def _hf_config() -> Any:
    """transformers' config of the same network (``Qwen3ASRForTokenClassification``)."""
    from transformers import Qwen3ASRConfig

    text = {k: v for k, v in TEXT_CONFIG.items() if k != "rope_theta"}
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": TEXT_CONFIG["rope_theta"]}
    return Qwen3ASRConfig(
        audio_config=dict(AUDIO_CONFIG),
        text_config=text,
        num_labels=CLASSIFY_NUM,
        timestamp_token_id=TIMESTAMP_TOKEN_ID,
        token_classification_bias=False,
        tie_word_embeddings=False,
    )


#: transformers' parameter names -> the release's (vLLM reads the latter).
_RENAMES = (
    ("model.multi_modal_projector.linear_1.", "thinker.audio_tower.proj1."),
    ("model.multi_modal_projector.linear_2.", "thinker.audio_tower.proj2."),
    ("model.audio_tower.", "thinker.audio_tower."),
    ("model.language_model.", "thinker.model."),
    ("score.", "thinker.lm_head."),
)


def _rename(name: str, pairs: tuple[tuple[str, str], ...]) -> str:
    for old, new in pairs:
        if name.startswith(old):
            return new + name[len(old) :]
    raise KeyError(name)


def transformers_model(model_dir: Path) -> Any:
    """The checkpoint in ``model_dir`` loaded into transformers' ``Qwen3ASRForTokenClassification``."""
    import torch
    from safetensors.torch import load_file
    from transformers import Qwen3ASRForTokenClassification

    model = Qwen3ASRForTokenClassification(_hf_config()).eval()
    back = tuple((new, old) for old, new in _RENAMES)
    weights = {
        _rename(k, back): v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()
    }
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # The encoder's sinusoid table is a buffer computed from the config, not a weight.
    if unexpected or any("positional_embedding" not in m for m in missing):
        raise RuntimeError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return model.to(torch.float32)


def build_qwen3_forcedaligner_tiny(out: Path) -> None:
    """Write the tiny aligner checkpoint (release layout), its tokenizer and its processor to ``out``."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForTokenClassification, Qwen3ASRProcessor

    torch.manual_seed(SEED)
    model = Qwen3ASRForTokenClassification(_hf_config()).eval()
    tensors: dict[str, Any] = {}
    for name, tensor in model.state_dict().items():
        if "positional_embedding" in name:
            continue
        value = tensor.detach().clone()
        if value.dim() == 2:
            value = value * WEIGHT_SCALE
        tensors[_rename(name, _RENAMES)] = value.contiguous()
    out.mkdir(parents=True)
    save_file(tensors, str(out / "model.safetensors"))
    config = {
        "architectures": ["Qwen3ASRForcedAlignerForTokenClassification"],
        "model_type": "qwen3_asr",
        "timestamp_token_id": TIMESTAMP_TOKEN_ID,
        "timestamp_segment_time": TIMESTAMP_SEGMENT_TIME,
        "support_languages": ["English", "Chinese"],
        "torch_dtype": "float32",
        "thinker_config": {
            "model_type": "qwen3_forced_aligner",
            "classify_num": CLASSIFY_NUM,
            "audio_token_id": SPECIAL_IDS["<|audio_pad|>"],
            "audio_start_token_id": SPECIAL_IDS["<|audio_start|>"],
            "audio_end_token_id": SPECIAL_IDS["<|audio_end|>"],
            "user_token_id": 872,
            "audio_config": dict(AUDIO_CONFIG),
            "text_config": dict(TEXT_CONFIG),
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    processor = Qwen3ASRProcessor(
        feature_extractor=Qwen3ASRFeatureExtractor(),
        tokenizer=_tokenizer(),
        chat_template=CHAT_TEMPLATE,
        timestamp_segment_time=TIMESTAMP_SEGMENT_TIME,
    )
    processor.save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: Qwen3-ForcedAligner layout, random weights (seed {SEED})"})
    )
