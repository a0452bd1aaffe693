"""torch.nn operations and torch functions torch 1.13's exporter cannot export (F.interpolate's
area and nearest-exact modes and its antialiasing, weight_norm, cumprod, logcumsumexp, median,
kthvalue, cummax, cummin, diff among them), through ampc.export
(python/ampc/_unexportable_ops.py), and two that it exports in forms ampc had to learn (AdaptiveMaxPool(1) as GlobalMaxPool, whose gradient goes to the
first maximum; movedim to a negative position as a Transpose with a negative perm,
frontend/onnx/transpose_perms.h): each model trains as PyTorch float64 does, stepped by
torch.optim.SGD."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import (Classifier, assert_function_trains_as_pytorch,
                               assert_states_close, train_with_sgd)


class BilinearPair(nn.Module):
    """nn.Bilinear on two views of x, over 2-D and (without bias) 3-D inputs."""

    def __init__(self):
        super().__init__()
        self.flat = nn.Bilinear(4, 5, 3)
        self.seq = nn.Bilinear(4, 4, 3, bias=False)

    def forward(self, x):
        return self.flat(x[:, 0, :4], x[:, 0, 3:]) + self.seq(x[:, :, :4], x[:, :, 4:]).mean(1)


class MovedChannels(nn.Module):
    """Channels moved last and back (a LayerNorm over channels, ConvNeXt's way): torch writes
    movedim(1, -1) as a Transpose with perm 0, 2, 3, -1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.conv(x).movedim(1, -1)).movedim(-1, 1)


class Interpolate(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        return F.interpolate(x, **self.options)


def seq(*layers):
    return nn.Sequential(*layers)


CASES = {
    # name: (body, input shape)
    "bilinear": (BilinearPair, (6, 2, 8)),
    "threshold": (lambda: seq(nn.Linear(8, 8), nn.Threshold(0.1, -1.0), nn.Linear(8, 3)), (6, 8)),
    "unflatten": (lambda: seq(nn.Linear(8, 32), nn.Unflatten(1, (2, 4, 4)), nn.Conv2d(2, 3, 2)),
                  (6, 8)),
    "conv_same_valid": (lambda: seq(nn.Conv2d(2, 4, 3, padding="same"), nn.ReLU(),
                                    nn.Conv2d(4, 4, (4, 3), padding="same", dilation=(1, 2)),
                                    nn.Conv2d(4, 3, 2, padding="valid"), nn.AdaptiveAvgPool2d(1)),
                        (2, 2, 7, 7)),
    "conv1d_same_even_kernel": (lambda: seq(nn.Conv1d(2, 3, 4, padding="same"),
                                            nn.AdaptiveAvgPool1d(1)), (2, 2, 7)),
    "conv_same_replicate": (lambda: seq(nn.Conv2d(2, 3, 4, padding="same",
                                                  padding_mode="replicate"),
                                        nn.AdaptiveAvgPool2d(1)), (2, 2, 7, 7)),
    "adaptive_avg_uneven": (lambda: seq(nn.Conv2d(2, 4, 3), nn.AdaptiveAvgPool2d((3, 2))),
                            (2, 2, 9, 8)),
    "adaptive_avg_upsampling": (lambda: seq(nn.Conv2d(2, 4, 3), nn.AdaptiveAvgPool2d((6, 6))),
                                (2, 2, 3, 3)),
    "adaptive_avg_3d_kept_axis": (lambda: seq(nn.Conv3d(2, 4, 1),
                                              nn.AdaptiveAvgPool3d((None, 2, 3))),
                                  (2, 2, 3, 5, 4)),
    "adaptive_max_uneven_after_relu": (lambda: seq(nn.Conv2d(2, 4, 3), nn.ReLU(),
                                                   nn.AdaptiveMaxPool2d((4, 3))), (2, 2, 9, 8)),
    "adaptive_max_1d": (lambda: seq(nn.Conv1d(2, 4, 3), nn.AdaptiveMaxPool1d(4)), (2, 2, 9)),
    "global_max_pool": (lambda: seq(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.AdaptiveMaxPool2d(1)),
                        (2, 2, 6, 6)),
    "movedim_negative": (MovedChannels, (2, 2, 6, 6)),
    "interpolate_area": (lambda: seq(nn.Conv2d(2, 3, 1), Interpolate(size=(3, 4), mode="area"),
                                     nn.Conv2d(3, 3, 2)), (2, 2, 7, 9)),
    "interpolate_area_3d": (lambda: seq(nn.Conv3d(2, 3, 1),
                                        Interpolate(size=(2, 3, 2), mode="area")),
                            (2, 2, 3, 5, 4)),
    "interpolate_nearest_exact": (lambda: seq(nn.Conv2d(2, 3, 1),
                                              Interpolate(scale_factor=1.5, mode="nearest-exact"),
                                              nn.Conv2d(3, 3, 2), nn.AdaptiveAvgPool2d(1)),
                                  (2, 2, 5, 5)),
    # Antialiased resizes (torchvision's): down, with align_corners, by scale factors (kept or
    # recomputed), and up along one axis while down along the other.
    "interpolate_antialias_bilinear": (lambda: seq(nn.Conv2d(2, 3, 1), Interpolate(
        size=(3, 5), mode="bilinear", antialias=True)), (2, 2, 8, 11)),
    "interpolate_antialias_bilinear_align_corners": (lambda: seq(nn.Conv2d(2, 3, 1), Interpolate(
        size=(12, 4), mode="bilinear", align_corners=True, antialias=True)), (2, 2, 5, 9)),
    "interpolate_antialias_bicubic_scale": (lambda: seq(nn.Conv2d(2, 3, 1), Interpolate(
        scale_factor=(0.4, 0.7), mode="bicubic", antialias=True)), (2, 2, 9, 10)),
    "interpolate_antialias_bicubic_recomputed": (lambda: seq(nn.Conv2d(2, 3, 1), Interpolate(
        scale_factor=0.45, mode="bicubic", recompute_scale_factor=True, antialias=True)),
        (2, 2, 9, 10)),
    # By 1 / scale_factor, as PyTorch maps it (5 / 11 would read input 2 for output 4, not 1).
    "interpolate_nearest_exact_1d": (lambda: seq(nn.Conv1d(2, 3, 1),
                                                 Interpolate(scale_factor=2.3,
                                                             mode="nearest-exact"),
                                                 nn.Conv1d(3, 3, 2), nn.AdaptiveAvgPool1d(1)),
                                     (2, 2, 5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trains_as_in_pytorch(name):
    body, shape = CASES[name]
    torch.manual_seed(0)
    net = Classifier(body())
    g = torch.Generator().manual_seed(1)
    feed = [{"x": torch.randn(*shape, generator=g), "y": torch.randint(0, 3, (shape[0],), generator=g)}
            for _ in range(3)]
    assert_states_close(*train_with_sgd(net, feed, lr=0.1))


FUNCTIONS = {
    "cumprod": lambda h: torch.cumprod(torch.tanh(h), 1).mean() + h.cumprod(dim=0).mean(),
    "logcumsumexp": lambda h: torch.logcumsumexp(h, 1).mean() + h.logcumsumexp(0).pow(2).mean(),
    "median": lambda h: (h.median(1).values.mean() + h.median() +
                         h.median(dim=0, keepdim=True)[0].pow(2).mean()),
    "kthvalue": lambda h: (h.kthvalue(2, 1).values.mean() +
                           torch.kthvalue(h, 3, 0, True).values.pow(2).mean()),
    # running extremes with ties (clamped), the latest among equals; indices gathered from
    "cummax_cummin": lambda h: (torch.cummax(h.clamp(min=0.2), 1).values.pow(2).mean()
                                + h.clamp(max=0.1).cummin(0)[0].mean()
                                + h.gather(1, h.clamp(min=0.2).cummin(1).indices).sin().mean()
                                + h.flip(0).gather(0, torch.cummax(h.clamp(0.0, 0.3),
                                                                   dim=0).indices).mean()),
    "diff": lambda h: (torch.diff(h, dim=1).pow(2).mean() + h.diff(n=2, dim=0).mean() +
                       torch.diff(h, prepend=h[:, :1], append=h[:, -2:]).pow(2).mean()),
    "norm_orders": lambda h: (h.norm(p=math.inf, dim=1).sum() + torch.norm(h, 3, 0).sum() +
                              h.norm(p=-math.inf, dim=1, keepdim=True).mean() +
                              torch.norm(h, p=4, dim=(0, 1)) + h.norm(p=math.inf)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_train_as_in_pytorch(name):
    assert_function_trains_as_pytorch(FUNCTIONS[name], rows=4, lr=0.1, seed=2)


class RunningExtremes(nn.Module):
    """loss = sum(w * [cummax's and cummin's values, NaN and infinities replaced, and their
    indices]): one SGD step with lr 1 moves w by them."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4, 9))

    def forward(self, x):
        big, small = torch.cummax(x, 0), torch.cummin(x, 0)
        stats = [torch.nan_to_num(r.values, nan=7.0, posinf=11.0, neginf=-13.0)
                 for r in (big, small)] + [big.indices.to(x.dtype), small.indices.to(x.dtype)]
        return (self.w * torch.stack(stats)).sum()


def test_running_extremes_at_nans_infinities_and_ties_are_pytorchs():
    # NaN wins from where it appears (the latest NaN's index), ties take the latest index
    x = torch.tensor([1.0, 1.0, 0.0, 3.0, 3.0, math.nan, 2.0, math.nan, 5.0])
    ours, want = train_with_sgd(RunningExtremes(), [{"x": x}], lr=1.0)
    assert_states_close(ours, want)
    x = torch.tensor([2.0, math.inf, math.inf, -1.0, -math.inf, -math.inf, 0.0, 4.0, 4.0])
    ours, want = train_with_sgd(RunningExtremes(), [{"x": x}], lr=1.0)
    assert_states_close(ours, want)


class WeightNormed(nn.Module):
    """torch.nn.utils.weight_norm over a Conv1d (dim 0), a Linear's input axis (dim 1) and a
    whole Linear weight (dim None)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.utils.weight_norm(nn.Conv1d(2, 4, 3))
        self.mid = nn.utils.weight_norm(nn.Linear(4, 4), dim=1)
        self.out = nn.utils.weight_norm(nn.Linear(4, 3), dim=None)

    def forward(self, x, y):
        return F.cross_entropy(self.out(self.mid(self.conv(x).mean(2))), y)


def test_weight_norm_trains_as_in_pytorch():
    """The reference is built alike and loaded, not deep-copied: a weight_norm module's
    computed weight cannot be copied."""
    torch.manual_seed(0)
    net = WeightNormed()
    reference = WeightNormed()
    reference.load_state_dict(net.state_dict())
    g = torch.Generator().manual_seed(3)
    feed = [{"x": torch.randn(3, 2, 6, generator=g), "y": torch.randint(0, 3, (3,), generator=g)}
            for _ in range(3)]
    assert_states_close(*train_with_sgd(net, feed, lr=0.3, reference=reference))


def test_a_crash_in_torchs_exporter_is_one_line_naming_the_op():
    """torch's symbolic for index_copy at rows nonzero() picks (as nn.AdaptiveLogSoftmaxWithLoss
    writes its clusters, which ampc.export rewrites) fails with a bare IndexError; ampc says
    that torch's exporter failed and in which op's symbolic."""

    class RowsCopied(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x, y):
            rows = (y > 10).nonzero().squeeze()
            h = self.lin(x)[:, 0]
            out = h.new_zeros(h.shape[0])
            out.index_copy_(0, rows, h.index_select(0, rows))
            return out.sum()

    with pytest.raises(ampc.Error, match=r"^torch.onnx.export could not export the module \(in its "
                                         r"symbolic function `index_copy`.*IndexError"):
        ampc.compile(RowsCopied(), {"x": torch.randn(6, 8), "y": torch.randint(0, 20, (6,))},
                     precision="fp32", optimizer="sgd", lr=0.1)
