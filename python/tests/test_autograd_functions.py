"""torch.autograd.Function in a module that ampc.compile exports
(python/ampc/_autograd_functions.py): torch.utils.checkpoint trains as PyTorch does, a
Function with a `symbolic` exports as its op, any other Function is refused by name, and the
documented rewrite of a custom gradient with .detach() trains as the Function does in
PyTorch. PyTorch in float64, stepped by torch.optim.SGD, is the oracle."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import ampc
from pytorch_reference import assert_states_close, train_with_sgd

LAMBDA = 0.3


def batches(n):
    g = torch.Generator().manual_seed(5)
    return [{"x": torch.randn(6, 8, generator=g), "y": torch.randint(0, 3, (6,), generator=g)}
            for _ in range(n)]


def train_both(net, reference, steps=3):
    """Trains `net` with ampc and `reference` (float64) with torch.optim.SGD on the same
    batches; returns their state dicts."""
    return train_with_sgd(net, batches(steps), lr=0.2, reference=reference)


class Checkpointed(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.block = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                         torch.nn.Linear(16, 8), torch.nn.Tanh())
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, y):
        h = checkpoint(self.block, x, use_reentrant=self.reentrant)
        h = checkpoint_sequential(self.block, 2, h)
        return F.cross_entropy(self.head(h), y)


@pytest.mark.parametrize("reentrant", [True, False])
def test_activation_checkpointing_trains_as_in_pytorch(reentrant):
    """torch's own export fails on the reentrant form ("unordered_map::at"). That form, with
    an input that does not require grad (x, the first call), gives the block's parameters no
    gradient in PyTorch: a known pitfall, kept (the second call gives them one)."""
    torch.manual_seed(0)
    net = Checkpointed(reentrant)
    assert_states_close(*train_both(net, copy.deepcopy(net)))


class Reversal(torch.autograd.Function):
    """A gradient reversal layer (domain-adversarial training): identity forward, -lambda
    times the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -LAMBDA * grad


def reverse_with_detach(x):
    """The same layer as an export keeps it: forward x, gradient -LAMBDA."""
    return (1 + LAMBDA) * x.detach() - LAMBDA * x


class DomainAdversarial(torch.nn.Module):
    def __init__(self, reverse):
        super().__init__()
        self.reverse = reverse
        self.features = torch.nn.Linear(8, 8)
        self.label = torch.nn.Linear(8, 3)
        self.domain = torch.nn.Linear(8, 2)

    def forward(self, x, y):
        h = torch.tanh(self.features(x))
        domain = (y % 2).long()
        return (F.cross_entropy(self.label(h), y)
                + F.cross_entropy(self.domain(self.reverse(h)), domain))


def test_a_function_without_symbolic_is_refused_by_name():
    with pytest.raises(ampc.Error, match=r"torch.autograd.Function Reversal: its backward is "
                                         r"Python code.*\.detach\(\)"):
        ampc.compile(DomainAdversarial(Reversal.apply), batches(1)[0], precision="fp32")


def test_its_detach_form_trains_as_the_function_does_in_pytorch():
    torch.manual_seed(0)
    net = DomainAdversarial(reverse_with_detach)
    reference = copy.deepcopy(net)
    reference.reverse = Reversal.apply
    assert_states_close(*train_both(net, reference))


class Normalize(torch.autograd.Function):
    """L2 normalisation with a `symbolic` (PyTorch's recipe for custom ops): exported as
    ONNX's LpNormalization, which ampc differentiates by its rule."""

    @staticmethod
    def forward(ctx, x):
        return x / x.norm(2, -1, keepdim=True)

    @staticmethod
    def symbolic(g, x):
        return g.op("LpNormalization", x, axis_i=-1, p_i=2)


class Cosine(torch.nn.Module):
    def __init__(self, normalize):
        super().__init__()
        self.normalize = normalize
        self.embed = torch.nn.Linear(8, 5)
        self.classes = torch.nn.Linear(5, 3)

    def forward(self, x, y):
        return F.cross_entropy(4 * self.classes(self.normalize(self.embed(x))), y)


def test_a_function_with_a_symbolic_exports_as_its_op(tmp_path):
    torch.manual_seed(0)
    net = Cosine(Normalize.apply)
    ampc.export(net, batches(1)[0], tmp_path / "cosine.onnx")
    assert "LpNormalization" in ampc.inspect(str(tmp_path / "cosine.onnx"))["ops"]
    reference = copy.deepcopy(net)
    reference.normalize = lambda x: x / x.norm(2, -1, keepdim=True)
    assert_states_close(*train_both(net, reference))
