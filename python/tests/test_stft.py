"""torch.stft, which torch 1.13's exporter cannot export, through ampc.export
(python/ampc/_stft.py: a strided convolution with the windowed DFT basis). A spectrogram
classifier trains as PyTorch float64 does (its own FFT), stepped by torch.optim.SGD: centred
(reflect and constant padding) and not, a window shorter than n_fft, none, a learned one,
one- and two-sided, normalized, the Tensor method, an unbatched signal; a complex result is
refused in one line naming the real form."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, train_with_sgd


class Spectrogram(nn.Module):
    """A 1-D convolution over the signal, the STFT's log power and imaginary part averaged
    over frames, and a linear classifier."""

    def __init__(self, n_fft, window="hann", method=False, unbatched=False, **options):
        super().__init__()
        self.pre = nn.Conv1d(1, 1, 3, padding=1)
        bins = n_fft // 2 + 1 if options.get("onesided", True) else n_fft
        self.head = nn.Linear(bins, 2)
        length = options.get("win_length") or n_fft
        if window == "learned":
            self.window = nn.Parameter(torch.hann_window(length))
        elif window == "hann":
            self.register_buffer("window", torch.hann_window(length))
        else:
            self.window = None
        self.n_fft, self.method, self.unbatched, self.options = n_fft, method, unbatched, options

    def spectrum(self, signal):
        stft = signal.stft if self.method else lambda *a, **k: torch.stft(signal, *a, **k)
        return stft(self.n_fft, window=self.window, return_complex=False, **self.options)

    def forward(self, x, y):
        signal = self.pre(x.unsqueeze(1)).squeeze(1)
        if self.unbatched:
            spectrum = torch.stack([self.spectrum(signal[i]) for i in range(signal.shape[0])])
        else:
            spectrum = self.spectrum(signal)
        power = spectrum.pow(2).sum(-1)
        # the power's log, and the imaginary part (its sign: a phase the power cannot show)
        features = torch.log(power + 1e-3).mean(-1) + 0.1 * spectrum[..., 1].mean(-1)
        return F.cross_entropy(self.head(features), y)


CASES = {
    "centred_reflect": lambda: Spectrogram(16, hop_length=4),
    "not_centred_method": lambda: Spectrogram(16, method=True, hop_length=8, center=False),
    "short_window_constant_pad": lambda: Spectrogram(16, win_length=10, hop_length=5,
                                                     pad_mode="constant"),
    "two_sided_normalized_learned_window": lambda: Spectrogram(
        15, window="learned", hop_length=4, onesided=False, normalized=True),
    "no_window_default_hop": lambda: Spectrogram(16, window=None),
    "unbatched": lambda: Spectrogram(16, unbatched=True, hop_length=4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_spectrogram_trains_as_pytorch(name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    feed = [{"x": torch.randn(3, 64, generator=g), "y": torch.tensor([0, 1, 1])}
            for _ in range(3)]
    assert_states_close(*train_with_sgd(CASES[name](), feed, lr=0.1), tol=5e-6)


class ComplexSpectrum(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(8, 8)

    def forward(self, x):
        return torch.stft(self.pre(x), 4, return_complex=True).abs().mean()


def test_a_complex_result_is_refused_in_one_line():
    with pytest.raises(ampc.Error, match=r"return_complex=True.*return_complex=False"):
        ampc.compile(ComplexSpectrum(), {"x": torch.randn(2, 8)})
