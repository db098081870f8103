"""pil_to_tensor and to_tensor in pure torch (numpy for the PIL conversion)."""

import numpy as np
import torch


def pil_to_tensor(pic):
    """PIL image -> uint8 CHW tensor (as torchvision)."""
    arr = np.array(pic, copy=True)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


def to_tensor(pic):
    """PIL image or HWC numpy array -> float CHW tensor; uint8 input is scaled to [0, 1]."""
    if isinstance(pic, np.ndarray):
        arr = pic if pic.ndim == 3 else pic[:, :, None]
        tensor = torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).contiguous()
    else:
        if getattr(pic, "mode", None) == "1":
            pic = pic.convert("L")
        tensor = pil_to_tensor(pic)
    if tensor.dtype == torch.uint8:
        return tensor.to(torch.float32).div(255)
    return tensor.to(torch.float32)


def __getattr__(name):
    raise AttributeError(f"torchvision stand-in: transforms.functional.{name} is not available")
