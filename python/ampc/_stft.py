"""torch.stft (an audio model's spectrogram front end) as ampc's exporter traces it (a rewrite
of _tracing.py): torch.onnx.export (torch 1.13) has no symbolic for aten::stft.

The short-time Fourier transform of a real signal is a strided convolution with the windowed
DFT basis: frame t's coefficient k is sum_n x[t hop + n] w[n] exp(-2 pi i k n / n_fft), so a
Conv1d with stride hop_length and 2 F kernels of n_fft taps (w cos and -w sin, F = n_fft / 2
+ 1 one-sided, n_fft two-sided) computes the real and imaginary parts. As torch.stft: center
pads n_fft / 2 on both sides with pad_mode, a window shorter than n_fft is centred in zeros, no
window is a rectangular one, normalized divides by sqrt(n_fft), and the result is [(B,) F,
frames, 2] (return_complex=False). The window is an input of the convolution's kernel, so a
learned window trains (a buffer, as torch.hann_window usually is, stays untrained).

A complex result (return_complex=True) cannot be written in ONNX's real tensors: it is refused
in one line, which names the real form (the magnitude is the last axis' 2-norm).
"""

from . import _tracing
from ._errors import export_error
from ._unexportable_ops import _arguments, _constant, _static


def _dft_basis(n_fft, bins):
    """cos and -sin of 2 pi k n / n_fft, [2 bins, n_fft], the angle reduced exactly first."""
    import numpy as np

    k = np.arange(bins).reshape(-1, 1)
    n = np.arange(n_fft).reshape(1, -1)
    angle = 2.0 * np.pi * ((k * n) % n_fft) / n_fft
    return np.concatenate([np.cos(angle), -np.sin(angle)]).tolist()


def _full_window(window, win_length, n_fft, dtype):
    """The window over n_fft taps: ones without one, a shorter one centred in zeros (a
    concatenation, whose shape torch's exporter keeps, where it loses F.pad's)."""
    import torch

    if window is None:
        window = torch.ones(win_length, dtype=dtype)
    if win_length == n_fft:
        return window
    left = (n_fft - win_length) // 2
    return torch.cat([torch.zeros(left, dtype=dtype), window,
                      torch.zeros(n_fft - win_length - left, dtype=dtype)])


def _stft(args, kwargs):
    import math

    import torch.nn.functional as F

    a = _arguments(("input", "n_fft", "hop_length", "win_length", "window", "center",
                    "pad_mode", "normalized", "onesided", "return_complex"), args, kwargs)
    if a.get("return_complex"):
        raise export_error(
            "torch.stft(return_complex=True): a complex tensor cannot be exported; ampc "
            "exports return_complex=False (real and imaginary parts as a last axis of 2; the "
            "magnitude is its 2-norm over that axis, the power its sum of squares)")
    x, n_fft = a["input"], int(a["n_fft"])
    if x.is_complex() or (a.get("window") is not None and a["window"].is_complex()):
        return _tracing.NOT_HANDLED  # torch refuses complex signals itself
    hop = int(a.get("hop_length") or n_fft // 4)
    win_length = int(a.get("win_length") or n_fft)
    bins = n_fft // 2 + 1 if a.get("onesided", True) in (True, None) else n_fft
    unbatched = x.dim() == 1
    signal = x.reshape(1, 1, -1) if unbatched else x.unsqueeze(1)
    if a.get("center", True):
        signal = F.pad(signal, [n_fft // 2, n_fft // 2], mode=a.get("pad_mode", "reflect"))
    window = _full_window(a.get("window"), win_length, n_fft, x.dtype)
    kernel = (_constant(_dft_basis(n_fft, bins), x.dtype) * window).unsqueeze(1)
    if a.get("normalized", False):
        kernel = kernel / math.sqrt(n_fft)
    frames = F.conv1d(signal, kernel, stride=hop)  # [B, 2 bins, T]
    batch, _, count = _static(frames.shape)
    out = frames.reshape(batch, 2, bins, count).permute(0, 2, 3, 1)
    return out[0] if unbatched else out


def rewrite(func, args, kwargs):
    """torch.stft and Tensor.stft (a rewrite of _tracing.py)."""
    import torch

    if func is torch.stft or func is torch.Tensor.stft:
        return _stft(args, kwargs)
    return _tracing.NOT_HANDLED
