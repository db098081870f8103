"""A sequence reward model for the ``reward`` fixture: Skywork-Reward-V2-Qwen3's layout, tiny and seeded.

Run through ``build_models.py`` with the fixture venv's python. ``Qwen3ForSequenceClassification`` with one
label (the reward is the score head's raw output at the conversation's last token), 2 layers of width 32,
weights from seed 37, the score head redrawn at scale 1 so that rewards spread instead of sitting near 0;
the Qwen3-compatible tokenizer of ``build_zoo.py`` and a ChatML chat template, which vLLM's ``/pooling``
applies to ``messages`` and ``references.py`` applies with transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

from build_zoo import _qwen3_config, _seeded, write_qwen3_tokenizer

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
