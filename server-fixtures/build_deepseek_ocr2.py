"""DeepSeek-OCR-2, tiny language model: ``DeepseekOCR2ForCausalLM`` (vLLM 0.32) with the ``ocr`` fixture's
tiny DeepSeek-V2 language model and tokenizer (build_ocr.py) and no weights, served with
``--load-format dummy``.

Run through ``build_models.py`` with the fixture venv's python. vLLM's ``deepseek_ocr2.py`` fixes both vision
towers at their real size in code (SAM ViT-B, 12 x 768, and ``build_qwen2_decoder_as_encoder()``, a Qwen2
decoder of 24 layers, 896 wide): ``config.json`` can only shrink the language model, and the projector reads
the encoder's 896-wide output. The fixture proves the request path (prompt, flags, the n-gram processor), not
the numbers; the comparison with transformers' ``deepseek_ocr2`` on real-size random weights is
``server-fixtures/check_deepseek_ocr2.py``, outside the test suite (its costs are in its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path

#: The width of vLLM's Qwen2 decoder-as-encoder, which the projector reads.
ENCODER_WIDTH = 896
#: The rotary base of vLLM's Qwen2 decoder-as-encoder (``CustomQwen2Decoder(rope_theta=1000000.0)`` in
#: ``deepencoder2.py``, as DeepSeek's ``qwen2_d2e.py``); transformers' encoder config defaults to 10000.
ENCODER_ROPE_THETA = 1000000.0


def build(out: Path) -> None:
    """The ``ocr`` fixture's directory with DeepSeek-OCR-2's architecture and projector input."""
    from build_ocr import build_deepseek_ocr_tiny

    build_deepseek_ocr_tiny(out)
    config = json.loads((out / "config.json").read_text())
    config["architectures"] = ["DeepseekOCR2ForCausalLM"]
    config["projector_config"]["input_dim"] = ENCODER_WIDTH
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {
                "note": "test fixture: DeepseekOCR2ForCausalLM with a tiny language model and no weights; "
                "serve with --load-format dummy. Output text is meaningless; the request path is real."
            }
        )
    )


#: The real-size random build's seed; its language model's 2-D weights are multiplied by ``LM_SCALE`` (the
#: default init gives one constant token whatever the image).
RANDOM_SEED = 5
LM_SCALE = 5.0


def transformers_config() -> object:
    """transformers' ``DeepseekOcr2Config`` for the weights vLLM's ``DeepseekOCR2ForCausalLM`` reads: the real
    SAM ViT-B and the Qwen2 decoder-as-encoder of vLLM's ``build_qwen2_decoder_as_encoder()`` (its size and
    its rotary base), and the ``ocr`` fixture's tiny DeepSeek-V2 language model (MoE from its second layer,
    plain attention)."""
    from build_ocr import config as ocr_config
    from transformers import DeepseekOcr2Config

    lm = ocr_config()["language_config"]
    return DeepseekOcr2Config(
        vision_config={
            "encoder_config": {
                "hidden_size": ENCODER_WIDTH,
                "num_hidden_layers": 24,
                "num_attention_heads": 14,
                "num_key_value_heads": 2,
                "intermediate_size": 4864,
                "rope_parameters": {"rope_type": "default", "rope_theta": ENCODER_ROPE_THETA},
            }
        },
        text_config={
            "vocab_size": lm["vocab_size"],
            "hidden_size": lm["hidden_size"],
            "intermediate_size": lm["intermediate_size"],
            "moe_intermediate_size": lm["moe_intermediate_size"],
            "num_hidden_layers": lm["num_hidden_layers"],
            "num_attention_heads": lm["num_attention_heads"],
            "num_key_value_heads": lm["num_key_value_heads"],
            "n_routed_experts": lm["n_routed_experts"],
            "n_shared_experts": lm["n_shared_experts"],
            "num_experts_per_tok": lm["num_experts_per_tok"],
            "mlp_layer_types": ["dense"] * lm["first_k_dense_replace"]
            + ["sparse"] * (lm["num_hidden_layers"] - lm["first_k_dense_replace"]),
            "topk_method": lm["topk_method"],
            "routed_scaling_factor": lm["routed_scaling_factor"],
            "max_position_embeddings": lm["max_position_embeddings"],
            "rms_norm_eps": lm["rms_norm_eps"],
            "rope_parameters": {"rope_type": "default", "rope_theta": lm["rope_theta"]},
            "bos_token_id": lm["bos_token_id"],
            "eos_token_id": lm["eos_token_id"],
            "pad_token_id": lm["pad_token_id"],
        },
        image_token_id=128815,
    )


def build_random(out: Path) -> None:
    """Real-size random weights (about 470M parameters, float16 on disk) in two views of one file:
    ``out/transformers`` (transformers' ``deepseek_ocr2`` config and processor; ``save_pretrained`` writes the
    original DeepSeek names, which both sides read) and ``out/vllm`` (the fixture's ``deepseek_vl_v2`` config
    and tokenizer, the weights linked). Every tensor of two or more dimensions is drawn from N(0, 0.02) with
    seed ``RANDOM_SEED``; the projector's and the language model's are then multiplied by ``LM_SCALE``."""
    import torch
    from transformers import DeepseekOcr2ForConditionalGeneration

    hf, served = out / "transformers", out / "vllm"
    generator = torch.Generator().manual_seed(RANDOM_SEED)
    model = DeepseekOcr2ForConditionalGeneration(transformers_config()).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
                if "vision_tower" not in name:
                    param.mul_(LM_SCALE)
            elif name.endswith("view_separator"):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02 * LM_SCALE)
    model.to(torch.float16).save_pretrained(str(hf), safe_serialization=True)
    build(served)
    (served / "config.json").write_text(
        json.dumps({**json.loads((served / "config.json").read_text()), "torch_dtype": "float16"}, indent=2)
    )
    for weights in hf.glob("*.safetensors*"):
        (served / weights.name).symlink_to(weights)
