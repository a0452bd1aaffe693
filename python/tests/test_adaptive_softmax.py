"""nn.AdaptiveLogSoftmaxWithLoss, whose forward torch 1.13's exporter cannot export (rows picked
by nonzero() and written back by index_copy_), through ampc.export
(python/ampc/_adaptive_softmax.py: the same function with static shapes). A language-model
head trains as PyTorch float64 does, stepped by torch.optim.SGD: targets in the shortlist and
in each cluster, a cluster no target falls in, the head's bias, the per-sample output used
as well as the loss, an unbatched sample."""

import pytest
import torch
import torch.nn as nn

from pytorch_reference import assert_states_close, train_with_sgd

CLASSES = 20


class Head(nn.Module):
    def __init__(self, use="loss", **options):
        super().__init__()
        self.proj = nn.Linear(6, 8)
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(8, CLASSES, [5, 12], div_value=2.0,
                                                     **options)
        self.use = use

    def forward(self, x, y):
        h = self.proj(x)
        if self.use == "unbatched":
            return sum(self.softmax(h[i], y[i]).loss for i in range(12)) / 12
        out = self.softmax(h, y)
        if self.use == "output":  # each sample weighted differently: each must be right
            return -(out.output * torch.linspace(0.5, 1.5, y.shape[0])).mean()
        return out.loss


TARGETS = {
    "every_cluster": torch.tensor([0, 3, 6, 7, 11, 12, 13, 19, 2, 5, 8, 15]),
    "shortlist_and_last_cluster": torch.tensor([0, 1, 4, 13, 19, 2, 14, 3, 16, 18, 0, 12]),
}

CASES = {
    "loss": (lambda: Head(), "every_cluster"),
    "empty_cluster": (lambda: Head(), "shortlist_and_last_cluster"),
    "head_bias_output": (lambda: Head("output", head_bias=True), "every_cluster"),
    "unbatched": (lambda: Head("unbatched"), "every_cluster"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_adaptive_softmax_trains_as_pytorch(name):
    make, targets = CASES[name]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    feed = [{"x": torch.randn(12, 6, generator=g), "y": TARGETS[targets]} for _ in range(3)]
    assert_states_close(*train_with_sgd(make(), feed, lr=0.5))
