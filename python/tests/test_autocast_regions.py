"""A forward's torch.autocast(..., enabled=False) region, which PyTorch's autocast computes in
fp32 (its inputs cast with .float()), through ampc.export
(python/ampc/_autocast_regions.py): its nodes stay fp32 in ampc's fp16 and bf16 plans, the
rest follows autocast's table; an autocast that torch disabled by itself (a "cuda" one on a
machine without CUDA) is not a region; a second region in the same forward (torch names its
scope with a count) is one as well; and the regions change no value in fp32 (PyTorch
float64 the oracle)."""

import warnings

import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, train_with_sgd


class WithRegion(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x, y):
        h = torch.relu(self.a(x))
        with torch.autocast("cuda", enabled=False):
            # .float() in mixed precision; the weights' dtype, so the float64 oracle runs it
            h = h.to(self.b.weight.dtype)
            h = self.b(h) @ torch.linspace(-1, 1, 64).reshape(8, 8).to(h.dtype)
        with warnings.catch_warnings(), torch.autocast("cuda"):  # without CUDA: off by torch
            warnings.simplefilter("ignore")
            h = torch.tanh(h)
        with torch.autocast("cuda", enabled=False):  # a second region (torch names it "_1")
            h = h @ torch.linspace(1, -1, 64).reshape(8, 8).to(h.dtype)
        return F.cross_entropy(self.c(h), y)


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.tensor([0, 1, 2, 0])}


def test_the_export_names_the_region(tmp_path):
    ampc.export(WithRegion(), batch(), tmp_path / "m.onnx")
    model = onnx.load(tmp_path / "m.onnx")
    names = {n.name for n in model.graph.node if n.op_type in ("Gemm", "MatMul", "Tanh")}
    assert {"/ampc_autocast_off/b/Gemm", "/ampc_autocast_off/MatMul",
            "/ampc_autocast_off_1/MatMul"} <= names
    assert {"/a/Gemm", "/c/Gemm", "/Tanh"} <= names
    props = {p.key: p.value for p in model.metadata_props}
    assert props["ampc.autocast_disabled"].split("\n") == [
        "*/ampc_autocast_off/*", "*/ampc_autocast_off_[0-9]*/*"]


@pytest.mark.parametrize("precision, low", [("fp16", "f16"), ("bf16", "bf16")])
def test_the_region_stays_fp32(precision, low):
    report = ampc.precision_report(WithRegion(), batch(), precision=precision)
    dtypes = {n["node"].split("'")[1]: n["compute_dtype"] for n in report["nodes"]}
    assert dtypes["/ampc_autocast_off/b/Gemm"] == "f32"
    assert dtypes["/ampc_autocast_off/MatMul"] == "f32"
    assert dtypes["/ampc_autocast_off_1/MatMul"] == "f32"
    assert dtypes["/a/Gemm"] == low and dtypes["/c/Gemm"] == low


def test_the_region_trains_as_pytorch_in_fp32():
    torch.manual_seed(0)
    assert_states_close(*train_with_sgd(WithRegion(), [batch(s) for s in range(3)], lr=0.2))
