"""``MelSpectrogram`` with torchaudio's defaults (power 2, centred reflect-padded periodic Hann STFT, HTK mel
scale, no filter-bank norm), in pure torch: the numbers of ``torchaudio.transforms.MelSpectrogram`` 2.11
(``functional.spectrogram``, ``melscale_fbanks``, ``_create_triangular_filterbank``; BSD-2-Clause)."""

from __future__ import annotations

import math

import torch


def _hz_to_mel(freq: float) -> float:
    return 2595.0 * math.log10(1.0 + freq / 700.0)


def _mel_to_hz(mels: torch.Tensor) -> torch.Tensor:
    return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)


def melscale_fbanks(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> torch.Tensor:
    """The (n_freqs, n_mels) triangular HTK filter bank."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    f_pts = _mel_to_hz(torch.linspace(_hz_to_mel(f_min), _hz_to_mel(f_max), n_mels + 2))
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down, up))


class MelSpectrogram(torch.nn.Module):
    """``(..., time)`` -> ``(..., n_mels, frames)`` power mel spectrogram."""

    def __init__(
        self,
        sample_rate: int = 16000,
        n_fft: int = 400,
        win_length: int | None = None,
        hop_length: int | None = None,
        f_min: float = 0.0,
        f_max: float | None = None,
        n_mels: int = 128,
    ) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.win_length = win_length if win_length is not None else n_fft
        self.hop_length = hop_length if hop_length is not None else self.win_length // 2
        self.register_buffer("window", torch.hann_window(self.win_length))
        f_max = f_max if f_max is not None else float(sample_rate // 2)
        self.register_buffer("fb", melscale_fbanks(n_fft // 2 + 1, f_min, f_max, n_mels, sample_rate))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        shape = waveform.size()
        spec = torch.stft(
            input=waveform.reshape(-1, shape[-1]),
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            win_length=self.win_length,
            window=self.window,
            center=True,
            pad_mode="reflect",
            normalized=False,
            onesided=True,
            return_complex=True,
        )
        power = spec.reshape(shape[:-1] + spec.shape[-2:]).abs().pow(2.0)
        return torch.matmul(power.transpose(-1, -2), self.fb).transpose(-1, -2)
