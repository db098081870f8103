"""Reward models for the ``reward`` and ``token-reward`` fixtures, tiny and seeded.

Run through ``build_models.py`` with the fixture venv's python. Both use the Qwen3-compatible tokenizer of
``build_zoo.py`` and a ChatML chat template, which vLLM's ``/pooling`` applies to ``messages`` and
``references.py`` applies with transformers.

- ``build`` (``qwen3-reward-tiny``): Skywork-Reward-V2-Qwen3's layout, ``Qwen3ForSequenceClassification``
  with one label (the reward is the score head's raw output at the conversation's last token), 2 layers of
  width 32, weights from seed 37, the score head redrawn at scale 1 so that rewards spread.
- ``build_token`` (``qwen2-reward-tiny``): Qwen2.5-Math-RM's layout, vLLM's ``Qwen2ForRewardModel``: a
  ``Qwen2Model`` (2 layers of width 64, head_dim 32) and the score head ``Linear(64, 64), ReLU,
  Linear(64, 1)`` (``score.0``, ``score.2``, with biases) applied to every token; weights from seed 41.
"""

from __future__ import annotations

import json
from pathlib import Path

from build_zoo import QWEN3_SPECIAL_IDS, QWEN3_VOCAB_SIZE, _qwen3_config, _seeded, write_qwen3_tokenizer

#: ChatML as Qwen3's own template writes a conversation without tools or thinking.
REWARD_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build(out: Path) -> None:
    """Write the ``qwen3-reward-tiny`` directory into ``out``."""
    import torch
    from transformers import Qwen3ForSequenceClassification

    out.mkdir(parents=True)
    write_qwen3_tokenizer(out)
    (out / "chat_template.jinja").write_text(REWARD_CHAT_TEMPLATE, encoding="utf-8")
    torch.manual_seed(37)
    config = _qwen3_config("Qwen3ForSequenceClassification", num_labels=1)
    model = Qwen3ForSequenceClassification(config).eval()
    with torch.no_grad():
        model.score.weight.copy_(_seeded(tuple(model.score.weight.shape), 371, 1.0))
    model.to(torch.float16).save_pretrained(str(out), safe_serialization=True)  # served as float32
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": "test fixture: Skywork-Reward-V2-Qwen3's layout, random weights (seed 37)"})
    )


def build_token(out: Path) -> None:
    """Write the ``qwen2-reward-tiny`` directory into ``out``."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    out.mkdir(parents=True)
    write_qwen3_tokenizer(out)
    (out / "chat_template.jinja").write_text(REWARD_CHAT_TEMPLATE, encoding="utf-8")
    config = Qwen2Config(
        vocab_size=QWEN3_VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,  # head_dim 32: the smallest vLLM's CPU attention takes
        num_key_value_heads=1,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=QWEN3_SPECIAL_IDS["<|im_end|>"],
        pad_token_id=QWEN3_SPECIAL_IDS["<|endoftext|>"],
        architectures=["Qwen2ForRewardModel"],
        num_labels=1,
    )
    torch.manual_seed(41)
    body = Qwen2Model(config).eval()
    tensors = {f"model.{name}": t.detach().clone() for name, t in body.state_dict().items()}
    width = config.hidden_size
    tensors["score.0.weight"] = _seeded((width, width), 411, width**-0.5)
    tensors["score.0.bias"] = _seeded((width,), 412, 0.1)
    tensors["score.2.weight"] = _seeded((1, width), 413, 1.0)
    tensors["score.2.bias"] = _seeded((1,), 414, 0.1)
    save_file(
        {k: v.to(torch.float16).contiguous() for k, v in tensors.items()}, str(out / "model.safetensors")
    )
    config.save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps(
            {"note": "test fixture: Qwen2.5-Math-RM's layout (Qwen2ForRewardModel), random weights (seed 41)"}
        )
    )
