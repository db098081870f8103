"""Build a tiny seeded Voxtral directory that vLLM serves and transformers runs on the same weights.

The layout of mistralai/Voxtral-Mini-3B-2507, shrunk: a one-layer Whisper-style audio encoder, a 4x
downsampling projector and a two-layer Llama LM with Tekken's real 131072-token vocabulary. The directory
holds both formats, as the real repository does:

- Hugging Face: ``model.safetensors``, ``config.json``, ``preprocessor_config.json`` (WhisperFeatureExtractor,
  128 mels) and ``tokenizer_config.json`` naming ``MistralCommonBackend`` (transformers'
  ``VoxtralForConditionalGeneration`` and ``VoxtralProcessor``);
- Mistral: ``consolidated.safetensors`` and ``params.json`` (vLLM 0.32 needs ``params.json``: its Voxtral
  reads ``downsample_factor`` from there only);
- ``tekken.json``: mistral_common's bundled Tekken vocabulary made a v7 tokenizer with the audio specials and
  an ``audio`` section (both sides tokenize with mistral_common).

Weights come from a fixed seed. Every 2-D weight is scaled up, the audio path (encoder, projector) and the
attention's query/key projections more, so that attention is sharp and the generated tokens follow the
recording instead of repeating one token whatever the input. ``embed_positions`` holds Whisper's sinusoids,
which vLLM recomputes instead of loading.

Run by ``build_models.py`` (``build_voxtral_tiny``) with the fixture venv's python, or directly:

    <venv>/bin/python server-fixtures/build_voxtral.py OUT_DIR
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

SEED = 0
#: Every 2-D weight is multiplied by WEIGHT_SCALE; the audio encoder and projector by AUDIO_SCALE instead,
#: the LM's query and key projections by QK_SCALE.
WEIGHT_SCALE = 5.0
AUDIO_SCALE = 20.0
QK_SCALE = 10.0

SAMPLING_RATE = 16000
NUM_MEL_BINS = 128
HOP_LENGTH = 160
WINDOW_SIZE = 400
CHUNK_LENGTH_S = 30.0
DOWNSAMPLE_FACTOR = 4
AUDIO_TOKEN_ID = 24

ENCODER = {"d_model": 32, "layers": 1, "heads": 2, "max_source_positions": 1500}
LM = {"hidden": 64, "layers": 2, "heads": 2, "kv_heads": 1, "head_dim": 32, "ffn": 128, "vocab": 131072}
ROPE_THETA = 1e8
NORM_EPS = 1e-5
MAX_POSITIONS = 131072

#: Special tokens 0..34 of a Tekken v7 audio tokenizer (the rest up to 1000 are <SPECIAL_n> fillers).
SPECIAL_TOKENS = {
    0: "<unk>",
    1: "<s>",
    2: "</s>",
    3: "[INST]",
    4: "[/INST]",
    5: "[AVAILABLE_TOOLS]",
    6: "[/AVAILABLE_TOOLS]",
    7: "[TOOL_RESULTS]",
    8: "[/TOOL_RESULTS]",
    9: "[TOOL_CALLS]",
    10: "[IMG]",
    11: "<pad>",
    12: "[IMG_BREAK]",
    13: "[IMG_END]",
    14: "[PREFIX]",
    15: "[MIDDLE]",
    16: "[SUFFIX]",
    17: "[SYSTEM_PROMPT]",
    18: "[/SYSTEM_PROMPT]",
    19: "[TOOL_CONTENT]",
    20: "[ARGS]",
    21: "[CALL_ID]",
    AUDIO_TOKEN_ID: "[AUDIO]",
    25: "[BEGIN_AUDIO]",
    34: "[TRANSCRIBE]",
}


def tekken() -> dict[str, Any]:
    """mistral_common's bundled Tekken vocabulary as a v7 tokenizer with audio specials."""
    import mistral_common

    source = Path(mistral_common.__file__).resolve().parent / "data" / "tekken_240911.json"
    data: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
    data["config"]["version"] = "v7"
    data["special_tokens"] = [
        {"rank": i, "token_str": SPECIAL_TOKENS.get(i, f"<SPECIAL_{i}>"), "is_control": True}
        for i in range(max(SPECIAL_TOKENS) + 1)
    ]
    data["audio"] = {
        "sampling_rate": SAMPLING_RATE,
        "frame_rate": SAMPLING_RATE / HOP_LENGTH / 2 / DOWNSAMPLE_FACTOR,
        "audio_encoding_config": {
            "num_mel_bins": NUM_MEL_BINS,
            "hop_length": HOP_LENGTH,
            "window_size": WINDOW_SIZE,
        },
        "chunk_length_s": CHUNK_LENGTH_S,
    }
    return data


def hf_config() -> Any:
    from transformers import VoxtralConfig

    d = ENCODER["d_model"]
    return VoxtralConfig(
        audio_config={
            "hidden_size": d,
            "intermediate_size": 4 * d,  # also the projector's input: 4 frames of d after downsampling
            "num_hidden_layers": ENCODER["layers"],
            "num_attention_heads": ENCODER["heads"],
            "num_mel_bins": NUM_MEL_BINS,
            "max_source_positions": ENCODER["max_source_positions"],
        },
        text_config={
            "vocab_size": LM["vocab"],
            "hidden_size": LM["hidden"],
            "intermediate_size": LM["ffn"],
            "num_hidden_layers": LM["layers"],
            "num_attention_heads": LM["heads"],
            "num_key_value_heads": LM["kv_heads"],
            "head_dim": LM["head_dim"],
            "rope_theta": ROPE_THETA,
            "rms_norm_eps": NORM_EPS,
            "max_position_embeddings": MAX_POSITIONS,
        },
        audio_token_id=AUDIO_TOKEN_ID,
        projector_hidden_act="gelu",
    )


def sinusoids(length: int, channels: int) -> Any:
    """Whisper's position table (vLLM's encoder computes the same instead of loading it)."""
    import torch

    increment = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-increment * torch.arange(channels // 2))
    scaled = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


def seeded_model(
    seed: int = SEED,
    scale: float = WEIGHT_SCALE,
    audio_scale: float = AUDIO_SCALE,
    qk_scale: float = QK_SCALE,
) -> Any:
    """transformers' VoxtralForConditionalGeneration with this module's seeded, scaled weights."""
    import torch
    from transformers import VoxtralForConditionalGeneration

    torch.manual_seed(seed)
    model = VoxtralForConditionalGeneration(hf_config()).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() < 2 or "embed_positions" in name:
                continue
            if "audio_tower" in name or "multi_modal_projector" in name:
                param.mul_(audio_scale)
            elif param.dim() != 2:
                continue
            elif name.endswith(("q_proj.weight", "k_proj.weight")):
                param.mul_(qk_scale)
            else:
                param.mul_(scale)
        positions = model.model.audio_tower.embed_positions.weight
        positions.copy_(sinusoids(*positions.shape))
    return model


def _to_rotary_interleaved(w: Any, n_heads: int) -> Any:
    """HF's half-split rotary rows -> mistral's interleaved ones (vLLM's maybe_remap_mistral undoes it)."""
    rows, cols = w.shape
    return w.view(n_heads, 2, rows // n_heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def mistral_state_dict(hf: dict[str, Any]) -> dict[str, Any]:
    """transformers' Voxtral parameter names -> the consolidated (mistral) names vLLM loads."""
    lm, enc, emb = "model.language_model", "model.audio_tower", "mm_whisper_embeddings"
    names: dict[str, str] = {
        f"{lm}.embed_tokens.weight": f"{emb}.tok_embeddings.weight",
        f"{lm}.norm.weight": "norm.weight",
        "lm_head.weight": "output.weight",
        "model.multi_modal_projector.linear_1.weight": f"{emb}.audio_language_projection.0.weight",
        "model.multi_modal_projector.linear_2.weight": f"{emb}.audio_language_projection.2.weight",
    }
    lm_layer = {
        "self_attn.q_proj": "attention.wq",
        "self_attn.k_proj": "attention.wk",
        "self_attn.v_proj": "attention.wv",
        "self_attn.o_proj": "attention.wo",
        "input_layernorm": "attention_norm",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "feed_forward.w1",
        "mlp.down_proj": "feed_forward.w2",
        "mlp.up_proj": "feed_forward.w3",
    }
    for i in range(LM["layers"]):
        for src, dst in lm_layer.items():
            names[f"{lm}.layers.{i}.{src}.weight"] = f"layers.{i}.{dst}.weight"
    whisper = f"{emb}.whisper_encoder"
    encoder_layer = {
        "self_attn.q_proj": "attention.wq",
        "self_attn.k_proj": "attention.wk",
        "self_attn.v_proj": "attention.wv",
        "self_attn.out_proj": "attention.wo",
        "self_attn_layer_norm": "attention_norm",
        "fc1": "feed_forward.w1",
        "fc2": "feed_forward.w2",
        "final_layer_norm": "ffn_norm",
    }
    for part in ("weight", "bias"):
        names[f"{enc}.conv1.{part}"] = f"{whisper}.conv_layers.0.{part}"
        names[f"{enc}.conv2.{part}"] = f"{whisper}.conv_layers.1.{part}"
        names[f"{enc}.layer_norm.{part}"] = f"{whisper}.transformer.norm.{part}"
        for i in range(ENCODER["layers"]):
            for src, dst in encoder_layer.items():
                names[f"{enc}.layers.{i}.{src}.{part}"] = f"{whisper}.transformer.layers.{i}.{dst}.{part}"
    names = {src: dst for src, dst in names.items() if src in hf}  # the encoder's k_proj has no bias
    left = set(hf) - set(names) - {f"{enc}.embed_positions.weight"}
    if left:
        raise ValueError(f"HF tensors without a mistral name: {sorted(left)}")
    out = {dst: hf[src] for src, dst in names.items()}
    for i in range(LM["layers"]):
        for w, heads in (("wq", LM["heads"]), ("wk", LM["kv_heads"])):
            key = f"layers.{i}.attention.{w}.weight"
            out[key] = _to_rotary_interleaved(out[key], heads)
    return {name: t.contiguous() for name, t in out.items()}


def params_json() -> dict[str, Any]:
    d = ENCODER["d_model"]
    return {
        "dim": LM["hidden"],
        "n_layers": LM["layers"],
        "head_dim": LM["head_dim"],
        "hidden_dim": LM["ffn"],
        "n_heads": LM["heads"],
        "n_kv_heads": LM["kv_heads"],
        "rope_theta": ROPE_THETA,
        "norm_eps": NORM_EPS,
        "vocab_size": LM["vocab"],
        "max_position_embeddings": MAX_POSITIONS,
        "max_seq_len": MAX_POSITIONS,
        "multimodal": {
            "whisper_model_args": {
                "encoder_args": {
                    "audio_encoding_args": {
                        "sampling_rate": SAMPLING_RATE,
                        "num_mel_bins": NUM_MEL_BINS,
                        "hop_length": HOP_LENGTH,
                        "window_size": WINDOW_SIZE,
                    },
                    "dim": d,
                    "n_layers": ENCODER["layers"],
                    "head_dim": d // ENCODER["heads"],
                    "hidden_dim": 4 * d,
                    "n_heads": ENCODER["heads"],
                    "vocab_size": LM["vocab"],
                    "max_source_positions": ENCODER["max_source_positions"],
                },
                "downsample_args": {"downsample_factor": DOWNSAMPLE_FACTOR},
            }
        },
    }


PREPROCESSOR_CONFIG = {
    "chunk_length": int(CHUNK_LENGTH_S),
    "dither": 0.0,
    "feature_extractor_type": "WhisperFeatureExtractor",
    "feature_size": NUM_MEL_BINS,
    "hop_length": HOP_LENGTH,
    "n_fft": WINDOW_SIZE,
    "n_samples": int(CHUNK_LENGTH_S) * SAMPLING_RATE,
    "nb_max_frames": int(CHUNK_LENGTH_S) * SAMPLING_RATE // HOP_LENGTH,
    "padding_side": "right",
    "padding_value": 0.0,
    "processor_class": "VoxtralProcessor",
    "return_attention_mask": False,
    "sampling_rate": SAMPLING_RATE,
}


def write_tokenizer_files(out: Path) -> None:
    """tekken.json and the small JSON files both formats need (no weights)."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {
        "tekken.json": tekken(),
        "preprocessor_config.json": PREPROCESSOR_CONFIG,
        "tokenizer_config.json": {"tokenizer_class": "MistralCommonBackend"},
        "params.json": params_json(),
    }
    for name, content in files.items():
        (out / name).write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")


def build(out: Path) -> None:
    """Write the model directory ``out`` (created)."""
    from safetensors.torch import save_file

    write_tokenizer_files(out)
    model = seeded_model()
    model.save_pretrained(str(out), safe_serialization=True)
    hf = {name: t.detach() for name, t in model.state_dict().items()}
    save_file(mistral_state_dict(hf), str(out / "consolidated.safetensors"), metadata={"format": "pt"})
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {
                "note": "test fixture: Voxtral's architecture, tiny, random weights (seed "
                f"{SEED}, 2-D weights x{WEIGHT_SCALE}, audio x{AUDIO_SCALE}, LM q/k x{QK_SCALE}); "
                "built by server-fixtures/build_voxtral.py; transcripts are meaningless"
            }
        )
    )


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    build(out)
    print(f"built {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
