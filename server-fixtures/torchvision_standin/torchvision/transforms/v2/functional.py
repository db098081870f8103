"""Import-only stand-in for torchvision.transforms.v2.functional."""

from ..functional import pil_to_tensor, to_tensor  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"torchvision stand-in: transforms.v2.functional.{name} is not available")
