"""Dropout that torch.onnx.export refuses in training mode, through ampc.export: channel
dropout (nn.Dropout1d/2d/3d), alpha dropout (nn.AlphaDropout, nn.FeatureAlphaDropout;
python/ampc/_feature_dropout.py) and dropout between stacked nn.LSTM / GRU / RNN layers
(python/ampc/_recurrent_dropout.py).

The draws are ampc's, so for the masks the oracle is PyTorch's definition: each statistic of a
step is read back exactly as a gradient (SGD with lr 1 moves w_k of the loss sum(w_k * s_k) by
s_k): every channel kept whole or dropped whole, the kept fraction within 5 standard deviations
of 1 - p, the kept values x / (1 - p) (alpha dropout: a x + alpha' a p, the dropped ones alpha'
a (p - 1), with PyTorch's constants), and the backward through the same mask. At p = 0 each
trains as PyTorch float64 does (torch's export refuses them in training mode even then). The
stacked recurrent layers are compared with PyTorch float64 at a rate that keeps every unit
(what the layer-by-layer form computes besides the draws; each layer starts from its slice of
learned initial states), and their file has a Dropout between each two layers."""

import math

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

import ampc
import pytorch_reference
from pytorch_reference import assert_states_close, train_with_sgd

STEPS = 3
P = 0.3
SATURATION = 1.7580993408473766  # SELU's -alpha * scale, PyTorch's alpha-dropout constant


def statistics_per_step(stats, count, x):
    return pytorch_reference.statistics_per_step(stats, count, x, STEPS)


def kept_fraction_is_binomial(kept, n, p=P):
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(kept - (1 - p)) <= 5 * sd, f"kept {kept}, expected {1 - p} +- 5 x {sd}"


@pytest.mark.parametrize("module,shape,channels", [
    (torch.nn.Dropout1d(P), (40, 30, 5), 40 * 30),
    (torch.nn.Dropout1d(P), (400, 5), 400),  # unbatched: one draw per channel
    (torch.nn.Dropout2d(P), (40, 30, 3, 4), 40 * 30),
    (torch.nn.Dropout3d(P), (20, 30, 2, 2, 3), 20 * 30),
    (torch.nn.Dropout3d(P), (300, 2, 2, 3), 300),  # unbatched
])
def test_channel_dropout_keeps_or_drops_whole_channels(module, shape, channels):
    x = torch.ones(shape)

    def stats(x):
        y = module(x).reshape(channels, -1)
        kept = (y != 0).to(x.dtype)
        whole = (kept.amax(1) - kept.amin(1)).max()  # 0 when no channel is split
        off_scale = (y - kept / (1 - P)).abs().max()
        return torch.stack([kept[:, 0].mean(), whole, off_scale])

    for s in statistics_per_step(stats, 3, x):
        kept_fraction_is_binomial(s[0], channels)
        assert s[1] == 0.0
        assert s[2] < 1e-6


@pytest.mark.parametrize("module,per_channel", [
    (torch.nn.AlphaDropout(P), False),
    (torch.nn.FeatureAlphaDropout(P), True),
])
def test_alpha_dropout_has_pytorchs_values(module, per_channel):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 50, 4, generator=g)
    a = 1 / math.sqrt((SATURATION**2 * P + 1) * (1 - P))

    def stats(x):
        y = module(x)
        kept_value = a * x + SATURATION * a * P
        dropped_value = SATURATION * a * (P - 1)
        kept = ((y - kept_value).abs() < 1e-5).to(x.dtype)
        off = torch.minimum((y - kept_value).abs(), (y - dropped_value).abs()).max()
        whole = (kept.amax(2) - kept.amin(2)).max() if per_channel else torch.zeros(())
        return torch.stack([kept.mean(), off, whole, y.mean()])

    n = 200 * 50 if per_channel else 200 * 50 * 4
    for s in statistics_per_step(stats, 4, x):
        kept_fraction_is_binomial(s[0], n)
        assert s[1] < 1e-5
        assert s[2] == 0.0
        # Alpha dropout keeps a standard normal input's mean at 0 (variance 1 as well).
        assert abs(s[3]) < 5 * (1.2 / math.sqrt(200 * 50) if per_channel else 1.2 / math.sqrt(n))


def test_channel_dropout_backward_uses_the_forward_mask():
    """sum(dropout2d(w x)) over ones is w K / (1 - p) for the K elements kept, so its
    gradient is the loss over w, whatever the mask."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(2.0))
            self.drop = torch.nn.Dropout2d(P)

        def forward(self, x):
            return self.drop(self.w * x).sum()

    x = torch.ones(64, 16, 2, 2)
    losses = []
    for w, loss, grad in pytorch_reference.scalar_steps(Scaled(), x, STEPS):
        assert grad == pytest.approx(loss / w, rel=1e-4)
        losses.append(loss)
    assert len(set(losses)) == STEPS  # a new mask each step


class Stacked(torch.nn.Module):
    """Three layers with learned initial states (each layer reads its own slice)."""

    def __init__(self, cell, p, **options):
        super().__init__()
        directions = 2 if options.get("bidirectional") else 1
        self.rnn = cell(4, 5, num_layers=3, dropout=p, **options)
        self.h0 = torch.nn.Parameter(torch.randn(3 * directions, 1, 5))
        self.c0 = torch.nn.Parameter(torch.randn(3 * directions, 1, 5))
        self.head = torch.nn.Linear(5 * directions, 3)

    def forward(self, x, y):
        batch = x.shape[0] if self.rnn.batch_first else x.shape[1]
        h0 = self.h0.expand(-1, batch, -1).contiguous()
        c0 = self.c0.expand(-1, batch, -1).contiguous()
        out, state = self.rnn(x, (h0, c0) if isinstance(self.rnn, torch.nn.LSTM) else h0)
        last = out[:, -1] if self.rnn.batch_first else out[-1]
        finals = state if isinstance(state, tuple) else (state,)
        return F.cross_entropy(self.head(last), y) + sum((s * s).mean() for s in finals)


class ConvThenDropout(torch.nn.Module):
    def __init__(self, dropout, conv):
        super().__init__()
        self.conv, self.dropout = conv, dropout

    def forward(self, x, y):
        return ((self.dropout(self.conv(x)) - y) ** 2).mean()


@pytest.mark.parametrize("dropout,conv,shape", [
    (torch.nn.Dropout1d, torch.nn.Conv1d, (4, 3, 7)),
    (torch.nn.Dropout2d, torch.nn.Conv2d, (4, 3, 6, 6)),
    (torch.nn.Dropout3d, torch.nn.Conv3d, (2, 3, 4, 4, 4)),
    (torch.nn.AlphaDropout, torch.nn.Conv2d, (4, 3, 6, 6)),
    (torch.nn.FeatureAlphaDropout, torch.nn.Conv2d, (4, 3, 6, 6)),
])
def test_dropout_at_rate_zero_trains_as_in_pytorch(dropout, conv, shape):
    """torch 1.13's export refuses each of them in training mode even at p = 0."""
    torch.manual_seed(0)
    net = ConvThenDropout(dropout(0.0), conv(3, 4, 3))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g)
    y = torch.randn(net.conv(x).shape, generator=g)
    assert_states_close(*train_with_sgd(net, [{"x": x, "y": y}] * STEPS, lr=0.5))


@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("options", [{}, {"bidirectional": True, "batch_first": True}])
def test_stacked_recurrent_layers_with_dropout_train_as_in_pytorch(cell, options):
    torch.manual_seed(0)
    net = Stacked(cell, 1e-9, **options)  # every unit kept: the draws cannot differ
    g = torch.Generator().manual_seed(1)
    shape = (3, 6, 4) if options else (6, 3, 4)
    feed = [{"x": torch.randn(*shape, generator=g), "y": torch.randint(0, 3, (3,), generator=g)}
            for _ in range(STEPS)]
    assert_states_close(*train_with_sgd(net, feed, lr=0.5))


def test_stacked_recurrent_dropout_is_a_dropout_after_every_layer_but_the_last(tmp_path):
    torch.manual_seed(0)
    x, y = torch.randn(6, 3, 4), torch.tensor([0, 1, 2])
    path = tmp_path / "lstm.onnx"
    ampc.export(Stacked(torch.nn.LSTM, 0.4), {"x": x, "y": y}, path)
    model = onnx.load(path)
    ops = [n.op_type for n in model.graph.node if n.op_type in ("LSTM", "Dropout")]
    assert ops == ["LSTM", "Dropout", "LSTM", "Dropout", "LSTM"]
    ratios = {n.input[1] for n in model.graph.node if n.op_type == "Dropout"}
    values = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update({n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t)
                   for n in model.graph.node if n.op_type == "Constant"})
    assert all(float(values[r]) == pytest.approx(0.4) for r in ratios)
    trainer = ampc.compile(str(path), precision="fp32", optimizer="sgd", lr=0.1)
    assert np.isfinite(trainer.step(x=x, y=y).loss)
