"""torchaudio stand-in for the CPU fixtures (see ../README.md): ``transforms.MelSpectrogram`` only."""

from . import transforms

__version__ = "0.0.0+fixture-standin"
__all__ = ["transforms"]
