"""PyTorch as the oracle of the Python tests that train: the same module trained by ampc and,
as a float64 copy, by torch.optim on the same batches (`train_with_sgd`), a classifier head
that every feature of a body feeds (`Classifier`), a torch function after a linear layer
(`AfterLinear`, `assert_function_trains_as_pytorch`), and statistics of ampc's random draws read
back exactly through the gradients of an SGD step (`Statistics`, `statistics_per_step`,
`scalar_steps`)."""

import copy

import numpy as np
import torch

import ampc


class Classifier(torch.nn.Module):
    """body(x) as the scores of 3 classes, each the sum of every third feature (feature i
    feeds class i mod 3, so no part of the body's output goes untested), and cross-entropy."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x, y):
        h = self.body(x).flatten(1)
        scores = torch.stack([h[:, k::3].sum(1) for k in range(3)], 1)
        return torch.nn.functional.cross_entropy(scores, y)


class AfterLinear(torch.nn.Module):
    """loss = f(Linear(x)), f a torch function (one torch cannot export)."""

    def __init__(self, f):
        super().__init__()
        self.f = f
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x):
        return self.f(self.linear(x))


def assert_function_trains_as_pytorch(f, rows, lr, seed):
    """AfterLinear(f), initialised from torch's seed 0, trained by ampc and by PyTorch float64
    on 3 batches [rows, 6] drawn from `seed`, ends in the same parameters."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(seed)
    feed = [{"x": torch.randn(rows, 6, generator=g)} for _ in range(3)]
    assert_states_close(*train_with_sgd(AfterLinear(f), feed, lr=lr))


def double_inputs(batch):
    """The batch with its floating-point tensors in float64 (the reference's inputs)."""
    return {k: v.double() if v.is_floating_point() else v for k, v in batch.items()}


def train_with_sgd(net, feed, lr, reference=None, **options):
    """Trains `net` with ampc (fp32, SGD with `lr` and `options`) and `reference` (default a
    copy of net; another module where the copy is not net's: a Function's rewrite, a module
    deepcopy cannot copy) in float64 with torch.optim.SGD, one step per batch of `feed`
    (keyword inputs of forward); copies ampc's result into `net` and returns (net's state
    dict, the reference's)."""
    reference = (copy.deepcopy(net) if reference is None else reference).double()
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=lr, **options)
    sgd = torch.optim.SGD(reference.parameters(), lr=lr)
    for batch in feed:
        trainer.step(**batch)
        sgd.zero_grad()
        reference(**double_inputs(batch)).backward()
        sgd.step()
    trainer.copy_to(net)
    return net.state_dict(), reference.state_dict()


def assert_states_close(ours, want, tol=2e-6):
    for name, value in want.items():
        diff = (ours[name].double() - value).abs().max().item()
        assert diff < tol, f"{name}: {diff}"


class Statistics(torch.nn.Module):
    """loss = sum_k w_k * s_k(x), so an SGD step with lr 1 moves w_k by s_k."""

    def __init__(self, stats, count):
        super().__init__()
        self.stats = stats
        self.w = torch.nn.Parameter(torch.zeros(count))

    def forward(self, x):
        return (self.w * self.stats(x)).sum()


def statistics_per_step(stats, count, x, steps):
    """The `count` statistics `stats(x)` of each of `steps` ampc training steps (each step
    draws its random values anew), as an array [steps, count]."""
    trainer = ampc.compile(Statistics(stats, count), {"x": x}, precision="fp32",
                           optimizer="sgd", lr=1.0)
    seen = []
    for _ in range(steps):
        before = trainer.state_dict()["w"].copy()
        trainer.step(x=x)
        seen.append(before - trainer.state_dict()["w"])
    return np.array(seen)


def scalar_steps(module, x, steps, lr=1e-4):
    """(w, loss, dloss/dw) of each of `steps` ampc SGD steps of a module whose one parameter is
    the scalar `w` (the gradient read back from the step: (w - w') / lr)."""
    trainer = ampc.compile(module, {"x": x}, precision="fp32", optimizer="sgd", lr=lr)
    out = []
    for _ in range(steps):
        w = float(trainer.state_dict()["w"])
        loss = trainer.step(x=x).loss
        out.append((w, loss, (w - float(trainer.state_dict()["w"])) / lr))
    return out
