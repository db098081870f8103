"""Build the tiny DeepSeek-OCR model directory for the ``ocr`` CPU fixture (no weight files).

Imported by build_models.py (``build_deepseek_ocr_tiny``) and run with the *fixture venv's* python.

What it writes (≈ 8 MB, see ../../shared/reference/cpu-fixture-models.md, "DeepSeek-OCR request path"):

- ``config.json``: the real ``DeepseekOCRForCausalLM`` architecture (``model_type: deepseek_vl_v2``, which
  vLLM maps to DeepSeek-OCR and its built-in chat template) with a *tiny* DeepseekV2 language model
  (hidden 64, 2 layers, one dense and one MoE layer with 4 experts, no MLA) and the real vocabulary size
  129,280. The vision encoder (SAM ViT-B + CLIP-L) is fixed in vLLM's code and is real-sized.
- a byte-level BPE tokenizer with the real vocabulary size and the real special ids: BOS/EOS/PAD 0/1/2,
  ``<image>`` 128815, ``<td>`` 128821, ``</td>`` 128822, plus the grounding tags.
- no weights: the server runs with ``--load-format dummy`` (every weight from a fixed seed, so outputs
  are deterministic across restarts). The generated text is meaningless; the request path is real.
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 129_280
BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"

#: Added tokens at fixed ids (as in DeepSeek-OCR's tokenizer for the ids the SDK relies on).
#: (id, content, special)
ADDED_TOKENS: tuple[tuple[int, str, bool], ...] = (
    (128810, "<|ref|>", True),
    (128811, "<|/ref|>", True),
    (128812, "<|det|>", True),
    (128813, "<|/det|>", True),
    (128814, "<|grounding|>", True),
    (128815, "<image>", True),
    (128816, "<|User|>", True),
    (128817, "<|Assistant|>", True),
    (128818, "<|quad|>", True),
    (128819, "<|/quad|>", True),
    (128820, "<table>", False),
    (128821, "<td>", False),
    (128822, "</td>", False),
    (128823, "<tr>", False),
    (128824, "</tr>", False),
    (128825, "</table>", False),
)
FIRST_ADDED = 128_000

#: Training text for the BPE merges: the prompts DeepSeek-OCR knows plus some document-like English.
CORPUS = """
Convert the document to markdown. OCR this image. Free OCR. Parse the figure.
Describe this image in detail. Locate the title in the image.
The quick brown fox jumps over the lazy dog. Hello world, this is a document.
Table 1: Results of the experiment. Figure 2: The architecture of the model.
Introduction. Methods. Results. Discussion. Conclusion. References. Abstract.
The total revenue for the year was 1,234,567 dollars, an increase of 12 percent.
# Title
## Section
- item one
- item two
| a | b |
|---|---|
| 1 | 2 |
$$ E = mc^2 $$
"""


def build_tokenizer(out: Path) -> None:
    """Write tokenizer.json (byte-level BPE, 129,280 ids) and tokenizer_config.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1200,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[BOS, EOS, PAD],
        show_progress=False,
    )
    lines = [line for line in CORPUS.splitlines() if line.strip()]
    tok.train_from_iterator(lines * 20, trainer)
    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    assert vocab[BOS] == 0 and vocab[EOS] == 1 and vocab[PAD] == 2, vocab
    # Filler ids up to the added tokens: word-like byte-level tokens ("Ġw1234" decodes to " w1234").
    next_id = len(vocab)
    while next_id < FIRST_ADDED:
        vocab[f"Ġw{next_id}"] = next_id
        next_id += 1
    fixed = {i: (content, special) for i, content, special in ADDED_TOKENS}
    added = [{"id": i, "content": c, "special": True} for c, i in ((BOS, 0), (EOS, 1), (PAD, 2))]
    for i in range(FIRST_ADDED, VOCAB_SIZE):
        content, special = fixed.get(i, (f"<｜place▁holder▁no▁{i - FIRST_ADDED}｜>", True))
        vocab[content] = i
        added.append({"id": i, "content": content, "special": special})
    assert len(vocab) == VOCAB_SIZE and sorted(vocab.values()) == list(range(VOCAB_SIZE))
    data["model"]["vocab"] = vocab
    data["added_tokens"] = [
        {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, **a} for a in added
    ]
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "LlamaTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOS,
                "pad_token": PAD,
                "add_bos_token": False,
                "add_eos_token": False,
                "clean_up_tokenization_spaces": False,
                "legacy": True,
                "model_max_length": 8192,
            },
            ensure_ascii=False,
            indent=2,
        )
    )
    (out / "special_tokens_map.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}, ensure_ascii=False, indent=2)
    )


def config() -> dict:
    """config.json: real DeepSeek-OCR architecture, tiny language model."""
    hidden = 64
    return {
        "architectures": ["DeepseekOCRForCausalLM"],
        "model_type": "deepseek_vl_v2",
        "tile_tag": "2D",
        "global_view_pos": "head",
        "candidate_resolutions": [[1024, 1024]],
        "torch_dtype": "float32",
        "projector_config": {
            "model_type": "mlp_projector",
            "projector_type": "linear",
            "input_dim": 2048,
            "n_embed": hidden,
        },
        "vision_config": {"model_type": "vision", "image_size": 1024, "model_name": "deeplip_b_l"},
        "language_config": {
            "architectures": ["DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v2",
            "vocab_size": VOCAB_SIZE,
            "hidden_size": hidden,
            "intermediate_size": 128,
            "moe_intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "first_k_dense_replace": 1,
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "moe_layer_freq": 1,
            "topk_method": "greedy",
            "n_group": 1,
            "topk_group": 1,
            "routed_scaling_factor": 1.0,
            "norm_topk_prob": False,
            "use_mla": False,
            "kv_lora_rank": None,
            "q_lora_rank": None,
            "qk_nope_head_dim": 0,
            "qk_rope_head_dim": 0,
            "v_head_dim": 0,
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "pad_token_id": 2,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
        },
        "bos_token_id": 0,
        "eos_token_id": 1,
        "pad_token_id": 2,
    }


def build_deepseek_ocr_tiny(out: Path) -> None:
    """Write the whole model directory into ``out`` (which must not exist yet)."""
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(config(), indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "do_sample": False}, indent=2)
    )
    build_tokenizer(out)
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {
                "note": "test fixture: DeepseekOCRForCausalLM with a tiny language model and no weights; "
                "serve with --load-format dummy. Output text is meaningless; the request path is real."
            }
        )
    )


if __name__ == "__main__":
    import sys

    build_deepseek_ocr_tiny(Path(sys.argv[1]))
