"""F.grid_sample (lowered into gathers and weights, passes/lower_grid_sample.h) at coordinates
that are not finite numbers, against PyTorch's CPU kernel: bilinear sampling with zeros
padding gives NaN at a NaN or infinite coordinate (RAFT at a small input divides by a
pyramid level's width - 1 = 0 and gets NaN flow in PyTorch), border padding sends NaN to the
first pixel and the infinities to the edges, nearest sampling treats them as outside; finite
coordinates inside and outside the image alongside."""

import math

import pytest
import torch
import torch.nn.functional as F

import ampc

NAN, INF = float("nan"), float("inf")
POINTS = [(0.1, NAN), (NAN, 0.1), (INF, 0.0), (-INF, 0.0), (NAN, NAN), (0.3, -0.7), (5.0, 0.2)]
OPTIONS = [
    {"align_corners": True},
    {"align_corners": False},
    {"padding_mode": "border", "align_corners": True},
    {"padding_mode": "border", "align_corners": False},
    {"mode": "nearest", "align_corners": False},
    {"mode": "nearest", "padding_mode": "border", "align_corners": True},
]


class Sample(torch.nn.Module):
    def __init__(self, options):
        super().__init__()
        self.image = torch.nn.Parameter(torch.arange(16.0).view(1, 1, 4, 4))
        self.options = options

    def forward(self, grid):
        return F.grid_sample(self.image, grid, **self.options).sum()


def ampc_value(module, grid):
    """The plan's loss (lr 0: nothing trains); NaN where the step reports a NaN loss."""
    trainer = ampc.compile(module, {"grid": grid}, precision="fp32", optimizer="sgd", lr=0.0)
    try:
        return trainer.step(grid=grid).loss
    except ampc.Error as e:
        assert "the loss is nan" in str(e)
        return NAN


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_grid_sample_at_coordinates_that_are_not_numbers(options):
    module = Sample(options)
    for point in POINTS:
        grid = torch.tensor(point).view(1, 1, 1, 2)
        with torch.no_grad():
            want = module(grid).item()
        got = ampc_value(module, grid)
        assert (math.isnan(want) and math.isnan(got)) or got == pytest.approx(want, abs=1e-5), (
            point, want, got)
