"""Import-only names (transformers imports them when torchvision is importable)."""

import enum


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4


def decode_image(*args, **kwargs):
    raise NotImplementedError("torchvision stand-in: decode_image is not available (vllm-tasks CPU fixture)")
