"""dots.ocr, tiny and seeded: ``DotsOCRForCausalLM`` (a Qwen2 LM and dots' own vision tower) as
rednote-hilab/dots.ocr publishes it, with ``configuration_dots.py`` beside the weights (vLLM 0.32 registers
the model class but reads the config through ``--trust-remote-code``, as the recipe serves it).

Run through ``build_models.py`` with the fixture venv's python. The text comes out of random weights; what the
fixture proves is that vLLM's prompt, image patches and decoding equal the reference's on the same weights
(``references.py``'s ``dots_ocr``). transformers 5.19 has no dots.ocr: the reference is transformers'
``Qwen2ForCausalLM`` (the class dots' ``modeling_dots_ocr.py`` subclasses) with ``DotsVision`` below, which
follows dots' ``modeling_dots_vision.py`` (its SDPA attention path, float32).

What the directory holds, beside the weights (``vision_tower.*``, ``model.*``, ``lm_head.*``):

- ``config.json``: ``model_type: dots_ocr`` with ``auto_map`` to ``configuration_dots.DotsOCRConfig`` (a copy
  of the config classes vLLM ships for this model, ``vllm/transformers_utils/configs/dotsocr.py``);
- the tokenizer: MiniLM's words, fillers up to dots' vocabulary size 151,936, dots' special tokens at their
  real ids and its chat template (string content only: ``<|user|>...<|endofuser|><|assistant|>``);
- ``Qwen2VLProcessor`` files (``Qwen2VLImageProcessor``: patch 14, merge 2, temporal patch 1, CLIP mean/std),
  which vLLM's ``DotsOCRProcessingInfo`` loads; ``max_pixels`` is lowered from dots' 11,289,600 to
  ``MAX_PIXELS`` so that vLLM's largest dummy image stays small on 2 cores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from build_qwen2_5_vl import use_pure_torchvision

VOCAB_SIZE = 151936
#: dots.ocr's special tokens at their ids (its tokenizer's added tokens).
SPECIAL_IDS: dict[str, int] = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|video_pad|>": 151656,
    "<|imgpad|>": 151665,
    "<|img|>": 151666,
    "<|endofimg|>": 151667,
    "<|systemprompt|>": 151668,
    "<|endofsystemprompt|>": 151669,
    "<|user|>": 151670,
    "<|endofuser|>": 151671,
    "<|assistant|>": 151672,
    "<|endofassistant|>": 151673,
}
IMAGE_TOKEN = "<|imgpad|>"
#: The image placeholder dots' client writes before its prompt (vLLM's ``get_placeholder_str`` for dots).
IMAGE_PLACEHOLDER = "<|img|><|imgpad|><|endofimg|>"
#: dots.ocr's chat template (its tokenizer_config.json): string content only, which is why its recipe serves
#: it with the string content format and writes the image placeholder into the text itself.
CHAT_TEMPLATE = (
    "{%- for m in messages %}"
    "{%- if m.role == 'system' %}{{- '<|system|>' + m.content + '<|endofsystem|>\\n' }}"
    "{%- elif m.role == 'user' %}{{- '<|user|>' + m.content + '<|endofuser|>' }}"
    "{%- elif m.role == 'assistant' %}{{- '<|assistant|>' + m.content }}"
    "{%- if not loop.last %}{{- '<|endofassistant|>' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if messages[-1].role != 'assistant' %}{{- '<|assistant|>' }}{%- endif %}"
)
#: The image processor's pixel budget: dots' minimum, and a maximum far under dots' (vLLM profiles the
#: largest image the processor allows).
MIN_PIXELS = 3136
MAX_PIXELS = 28 * 28 * 64
SEED = 11
#: Every 2-D weight multiplied by this: the default init (std 0.02) gives one constant token whatever the
#: image; larger weights make the greedy output follow it.
WEIGHT_SCALE = 5.0

#: The vision tower (dots' ``vision_config`` keys), tiny; ``hidden_size`` is the LM's width.
VISION_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_channels": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 1,
    "rms_norm_eps": 1e-5,
    "use_bias": False,
    "post_norm": True,
    "is_causal": False,
    "init_merger_std": 0.02,
    "initializer_range": 0.02,
    "attn_implementation": "sdpa",
}


def _torch_modules() -> Any:
    """``DotsVision`` and its parts, defined on first use (torch is imported lazily)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim: int, eps: float) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight

    def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
        """Rotary embedding of ``x`` [S, H, D] by ``freqs`` [S, D/2], halves rotated (dots' vision rope)."""
        cos = freqs.cos().repeat(1, 2)[:, None, :]
        sin = freqs.sin().repeat(1, 2)[:, None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    class Attention(nn.Module):
        def __init__(self, dim: int, heads: int, bias: bool) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, dim * 3, bias=bias)
            self.proj = nn.Linear(dim, dim, bias=bias)

        def forward(self, x: torch.Tensor, cu_seqlens: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]
            q, k, v = self.qkv(x).reshape(n, 3, self.heads, -1).permute(1, 0, 2, 3).unbind(0)
            q, k = rotate(q, freqs), rotate(k, freqs)
            mask = torch.zeros(1, n, n, dtype=torch.bool)
            for start, end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist(), strict=True):
                mask[..., start:end, start:end] = True
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, mask)
            return self.proj(out.transpose(0, 1).reshape(n, -1))

    class SwiGLU(nn.Module):
        def __init__(self, dim: int, hidden: int, bias: bool) -> None:
            super().__init__()
            self.fc1 = nn.Linear(dim, hidden, bias=bias)
            self.fc2 = nn.Linear(hidden, dim, bias=bias)
            self.fc3 = nn.Linear(dim, hidden, bias=bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(F.silu(self.fc1(x)) * self.fc3(x))

    class Block(nn.Module):
        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            self.norm1 = RMSNorm(c["embed_dim"], c["rms_norm_eps"])
            self.attn = Attention(c["embed_dim"], c["num_attention_heads"], c["use_bias"])
            self.norm2 = RMSNorm(c["embed_dim"], c["rms_norm_eps"])
            self.mlp = SwiGLU(c["embed_dim"], c["intermediate_size"], c["use_bias"])

        def forward(self, x: torch.Tensor, cu_seqlens: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.norm1(x), cu_seqlens, freqs)
            return x + self.mlp(self.norm2(x))

    class Patchifier(nn.Module):
        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            self.c = c
            size = c["patch_size"]
            self.proj = nn.Conv2d(c["num_channels"], c["embed_dim"], kernel_size=size, stride=size)
            self.norm = RMSNorm(c["embed_dim"], c["rms_norm_eps"])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            c = self.c
            x = x.view(-1, c["num_channels"], c["temporal_patch_size"], c["patch_size"], c["patch_size"])
            return self.norm(self.proj(x[:, :, 0]).view(-1, c["embed_dim"]))

    class PatchEmbed(nn.Module):
        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            self.patchifier = Patchifier(c)

    class Merger(nn.Module):
        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            self.width = c["embed_dim"] * c["spatial_merge_size"] ** 2
            self.ln_q = nn.LayerNorm(c["embed_dim"], eps=1e-6)
            self.mlp = nn.Sequential(
                nn.Linear(self.width, self.width), nn.GELU(), nn.Linear(self.width, c["hidden_size"])
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mlp(self.ln_q(x).view(-1, self.width))

    class DotsVision(nn.Module):
        """dots' ``DotsVisionTransformer``: patches [N, C*14*14] and grids [[t, h, w], ...] in, one LM-wide
        row per 2x2 patches out."""

        def __init__(self, c: dict[str, Any]) -> None:
            super().__init__()
            self.c = c
            self.patch_embed = PatchEmbed(c)
            self.blocks = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
            self.post_trunk_norm = RMSNorm(c["embed_dim"], c["rms_norm_eps"])
            self.merger = Merger(c)
            head_dim = c["embed_dim"] // c["num_attention_heads"]
            rope_dim = head_dim // 2  # per axis: rows rotate one half of each head, columns the other
            self.inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rope_dim, 2, dtype=torch.float) / rope_dim))

        def positions(self, grid: list[list[int]]) -> torch.Tensor:
            """Each patch's (row, column), in the processor's order (2x2 neighbours together)."""
            m = self.c["spatial_merge_size"]
            rows = []
            for t, h, w in grid:
                hpos = torch.arange(h)[:, None].expand(h, w).reshape(h // m, m, w // m, m)
                wpos = torch.arange(w)[None, :].expand(h, w).reshape(h // m, m, w // m, m)
                pair = [pos.permute(0, 2, 1, 3).flatten() for pos in (hpos, wpos)]
                rows.append(torch.stack(pair, -1).repeat(t, 1))
            return torch.cat(rows)

        def forward(self, pixels: torch.Tensor, grid: list[list[int]]) -> torch.Tensor:
            x = self.patch_embed.patchifier(pixels.float())
            table = torch.outer(torch.arange(max(max(h, w) for _, h, w in grid)).float(), self.inv_freq)
            freqs = table[self.positions(grid)].flatten(1)
            sizes = torch.tensor([h * w for t, h, w in grid for _ in range(t)])
            cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
            for block in self.blocks:
                x = block(x, cu_seqlens, freqs)
            return self.merger(self.post_trunk_norm(x))

    return DotsVision


def vision_tower(config: dict[str, Any] = VISION_CONFIG) -> Any:
    """A ``DotsVision`` module for ``config`` (dots' ``vision_config``), default init."""
    return _torch_modules()(config)


def lm_config() -> Any:
    """The tiny Qwen2 language model's config (dots' text config keys)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=VISION_CONFIG["hidden_size"],
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,  # head_dim 32: the smallest head size vLLM's CPU attention takes
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        use_sliding_window=False,
        bos_token_id=SPECIAL_IDS["<|endoftext|>"],
        eos_token_id=SPECIAL_IDS["<|endoftext|>"],
        torch_dtype="float32",
    )


def build(out: Path) -> None:
    """Weights from seed ``SEED`` (every 2-D weight times ``WEIGHT_SCALE``), config, remote config code,
    tokenizer and processor files."""
    import torch
    from build_qwen3_asr import write_tokenizer
    from safetensors.torch import save_file

    use_pure_torchvision()
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2ForCausalLM,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    out.mkdir(parents=True)
    torch.manual_seed(SEED)
    lm = Qwen2ForCausalLM(lm_config()).eval()
    vision = vision_tower().eval()
    weights = {k: v for k, v in lm.state_dict().items()}
    weights.update({f"vision_tower.{k}": v for k, v in vision.state_dict().items()})
    with torch.no_grad():
        weights = {k: (v * WEIGHT_SCALE if v.dim() == 2 else v).contiguous() for k, v in weights.items()}
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})

    config = lm_config().to_dict()
    config.update(
        architectures=["DotsOCRForCausalLM"],
        model_type="dots_ocr",
        auto_map={"AutoConfig": "configuration_dots.DotsOCRConfig"},
        image_token_id=SPECIAL_IDS[IMAGE_TOKEN],
        video_token_id=SPECIAL_IDS["<|video_pad|>"],
        vision_config=VISION_CONFIG,
    )
    (out / "config.json").write_text(json.dumps(config, indent=2))
    import vllm.transformers_utils.configs.dotsocr as vllm_config

    shutil.copyfile(vllm_config.__file__, out / "configuration_dots.py")
    (out / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": SPECIAL_IDS["<|endoftext|>"],
                "eos_token_id": [SPECIAL_IDS["<|endoftext|>"], SPECIAL_IDS["<|endofassistant|>"]],
                "do_sample": False,
            },
            indent=2,
        )
    )
    write_tokenizer(
        out,
        vocab_size=VOCAB_SIZE,
        special_ids=SPECIAL_IDS,
        extra_special_tokens={"image_token": IMAGE_TOKEN, "video_token": "<|video_pad|>"},
        chat_template=CHAT_TEMPLATE,
        eos_token="<|endoftext|>",
    )
    pixels = {"min_pixels": MIN_PIXELS, "max_pixels": MAX_PIXELS}
    image_kwargs: dict[str, Any] = {
        "patch_size": VISION_CONFIG["patch_size"],
        "temporal_patch_size": VISION_CONFIG["temporal_patch_size"],
        "merge_size": VISION_CONFIG["spatial_merge_size"],
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        **pixels,
    }
    Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**image_kwargs),
        tokenizer=PreTrainedTokenizerFast.from_pretrained(str(out)),
        video_processor=Qwen2VLVideoProcessor(**image_kwargs),
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(str(out))
    (out / "FIXTURE.json").write_text(
        json.dumps({"note": f"test fixture: dots.ocr layout, random weights (seed {SEED}); text is noise"})
    )
