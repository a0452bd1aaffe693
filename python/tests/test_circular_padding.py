"""Circular padding, which torch 1.13's exporter writes wrongly (it wraps x[-(p+1):-1] where
PyTorch pads with x[-p:], and swaps an axis's two pads): through ampc.export
(python/ampc/_circular_pad.py) a module with `padding_mode="circular"` convolutions or
`F.pad(mode="circular")`, asymmetric and cropping pads included, trains as PyTorch float64
does, stepped by torch.optim.SGD; a plain torch.onnx.export file of it is refused naming its
Concat and ampc.export (passes/circular_pad_export.h), and torch's own symbolic is back after
ampc's export."""

import io

import pytest
import torch
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, train_with_sgd


class CircularPad(torch.nn.Module):
    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        return F.pad(x, self.pad, mode="circular")


class Classifier(torch.nn.Module):
    def __init__(self, body, pool):
        super().__init__()
        self.body = body
        self.pool = pool

    def forward(self, x, y):
        return F.cross_entropy(self.pool(self.body(x)).flatten(1), y)


def conv(dims, k, padding, c_out=3):
    cls = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[dims]
    return cls(2, c_out, k, padding=padding, padding_mode="circular")


def pool(dims):
    return {1: torch.nn.AdaptiveAvgPool1d, 2: torch.nn.AdaptiveAvgPool2d,
            3: torch.nn.AdaptiveAvgPool3d}[dims](1)


CASES = {
    # name: (body, input shape)
    "conv2d_pad1": (lambda: conv(2, 3, 1), (2, 2, 7, 7)),
    "conv2d_pad2_1": (lambda: conv(2, (5, 3), (2, 1)), (2, 2, 7, 6)),
    "conv1d_pad2": (lambda: conv(1, 5, 2), (2, 2, 9)),
    "conv3d_pad1": (lambda: conv(3, 3, 1), (2, 2, 4, 5, 4)),
    # F.pad's order: the last axis's (left, right), then the one before it.
    "pad_asymmetric": (lambda: torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1),
                                                   CircularPad((2, 0, 1, 3)), conv(2, 3, 0)),
                       (2, 2, 5, 6)),
    "pad_cropping": (lambda: torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1),
                                                 CircularPad((-1, 2, 2, -1)), conv(2, 3, 0)),
                     (2, 2, 5, 6)),
}


def batches(shape, n=3):
    g = torch.Generator().manual_seed(3)
    return [{"x": torch.randn(*shape, generator=g), "y": torch.randint(0, 3, (shape[0],), generator=g)}
            for _ in range(n)]


def make(name):
    torch.manual_seed(0)
    body, shape = CASES[name]
    dims = len(shape) - 2
    return Classifier(body(), pool(dims)), shape


@pytest.mark.parametrize("name", sorted(CASES))
def test_circular_padding_trains_as_in_pytorch(name):
    net, shape = make(name)
    assert_states_close(*train_with_sgd(net, batches(shape), lr=0.5))


def test_a_plain_export_of_circular_padding_is_refused(tmp_path):
    """The refusal names the Concat torch wrote and ampc.export; torch's symbolic, replaced
    while ampc exports, is torch's again afterwards (so this file has the wrong form)."""
    from torch.onnx import symbolic_opset9

    original = symbolic_opset9._pad_circular
    net, shape = make("conv2d_pad1")
    b = batches(shape, 1)[0]
    ampc.export(net, b, tmp_path / "ampc.onnx")
    assert symbolic_opset9._pad_circular is original
    buf = io.BytesIO()
    torch.onnx.export(net, (b["x"], b["y"]), buf, input_names=["x", "y"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    path = tmp_path / "plain.onnx"
    path.write_bytes(buf.getvalue())
    with pytest.raises(ampc.Error, match=r"Concat.*circular padding.*ampc.export"):
        ampc.compile(str(path), precision="fp32", optimizer="sgd", lr=0.5)
