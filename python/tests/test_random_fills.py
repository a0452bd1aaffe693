"""In-place random fills that torch.onnx.export cannot export (bernoulli_, uniform_,
exponential_: torchvision's StochasticDepth, F.gumbel_softmax) train through ampc.compile
(python/ampc/_random_fills.py). The draws are ampc's, so the oracle is the distribution:
each statistic of a step is read back exactly as a gradient (SGD with lr 1 moves a parameter
w of the loss sum(w_k * s_k) by s_k), and must lie within 5 standard deviations of its
expectation; a mask drawn anew each step, and the same mask in the forward and the backward.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

import pytorch_reference

STEPS = 4


def statistics_per_step(draw, count, x):
    return pytorch_reference.statistics_per_step(draw, count, x, STEPS)


def within(value, mean, sd, what):
    assert abs(value - mean) <= 5 * sd, f"{what}: {value}, expected {mean} +- 5 x {sd}"


def test_uniform_and_exponential_fills_have_their_distributions():
    n = 20000
    x = torch.zeros(n)

    def draw(x):  # x is zeros (the plan needs an input)
        u = torch.empty_like(x).uniform_(-1.0, 3.0) + x
        e = torch.empty_like(x).exponential_(2.0) + x
        return torch.stack([u.mean(), (u * u).mean(), u.min(), u.max(), e.mean(), (e * e).mean(),
                            e.min()])

    for s in statistics_per_step(draw, 7, x):
        # uniform(-1, 3): mean 1, E[u^2] 7/3 (variance 4/3, E[u^4] = 61/5); exponential(2):
        # mean 1/2, E[e^2] 1/2 (E[e^4] = 24/16).
        within(s[0], 1.0, math.sqrt(4 / 3 / n), "uniform mean")
        within(s[1], 7 / 3, math.sqrt((61 / 5 - (7 / 3) ** 2) / n), "uniform E[u^2]")
        assert -1.0 <= s[2] < -0.99 and 2.99 < s[3] < 3.0, s[2:4]
        within(s[4], 0.5, math.sqrt(0.25 / n), "exponential mean")
        within(s[5], 0.5, math.sqrt((1.5 - 0.25) / n), "exponential E[e^2]")
        assert s[6] >= 0.0


def test_stochastic_depth_drops_rows_anew_each_step_and_backward_uses_the_same_mask():
    """torchvision's StochasticDepth (p 0.2, per row): each kept row is scaled by 1 / 0.8,
    so sum(sd(w x)) = w K / 0.8 for the K rows kept and its gradient is K / 0.8."""
    rows = 2000

    class Depth(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(2.0))
            self.sd = torchvision.ops.StochasticDepth(0.2, "row")

        def forward(self, x):
            return self.sd(self.w * x).sum()

    x = torch.ones(rows, 1)
    kept = []
    for w, loss, grad in pytorch_reference.scalar_steps(Depth(), x, STEPS):
        k = loss * 0.8 / w
        assert abs(k - round(k)) < 1e-3 * rows, k  # whole rows
        np.testing.assert_allclose(grad, loss / w, rtol=1e-3)  # the forward's mask
        within(k, 0.8 * rows, math.sqrt(rows * 0.8 * 0.2), "rows kept")
        kept.append(round(k))
    assert len(set(kept)) > 1, kept  # drawn anew each step


def test_bernoulli_of_a_probability_tensor():
    n = 20000
    x = torch.linspace(0.0, 1.0, n)

    def draw(x):
        mask = torch.empty_like(x).bernoulli_(x)
        return torch.stack([mask.sum(), (mask * x).sum()])

    for s in statistics_per_step(draw, 2, x):
        p = x.double()
        within(s[0], p.sum().item(), math.sqrt((p * (1 - p)).sum().item()), "ones drawn")
        within(s[1], (p * p).sum().item(), math.sqrt((p ** 3 * (1 - p)).sum().item()),
               "ones weighted by p")


def test_gumbel_softmax_hard_picks_by_the_softmax_probabilities():
    """F.gumbel_softmax(hard=True) (exponential noise, argmax, scatter, the straight-through
    detach): one class per row, class k about n p_k times."""
    n = 4000
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    x = probs.log().expand(n, 4).contiguous()

    def draw(x):
        return F.gumbel_softmax(x, tau=0.5, hard=True).sum(0)

    for s in statistics_per_step(draw, 4, x):
        assert s.sum() == n, s
        for k in range(4):
            p = probs[k].item()
            within(s[k], n * p, math.sqrt(n * p * (1 - p)), f"class {k}")
