"""A forward that reads a Python value out of a tensor computed from the data (`.item()`,
`if mask.any():`, `.tolist()`) would be traced with the example batch's value, which the plan
would then use on every batch (a random draw's likewise): ampc.compile refuses it, naming the
line. Conversions of sizes, of values made of constants, torch's own argument checks and
`assert` lines are not refused, and such a module trains as PyTorch float64 does on batches
unlike the example one (the oracle), as does the refused forward written with tensor ops."""

import pytest
import torch
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, train_with_sgd


def feed(rows, seeds):
    """Batches of [rows, 4] inputs and labels in 0..2, one per seed: their positives differ."""
    out = []
    for seed in seeds:
        g = torch.Generator().manual_seed(seed)
        out.append({"x": torch.randn(rows, 4, generator=g),
                    "y": torch.randint(0, 3, (rows,), generator=g)})
    return out


class CountNormalised(torch.nn.Module):
    """A detection-style loss normalised by the batch's count of positive labels."""

    def __init__(self, as_tensor=False):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.as_tensor = as_tensor

    def forward(self, x, y):
        total = F.cross_entropy(self.linear(x), y, reduction="sum")
        if self.as_tensor:
            return total / (y > 0).sum().clamp(min=1)
        return total / max((y > 0).sum().item(), 1)


class Branching(torch.nn.Module):
    def __init__(self, as_tensor=False):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.as_tensor = as_tensor

    def forward(self, x, y):
        z = self.linear(x)
        if self.as_tensor:
            z = torch.where((z > 0.5).any(), z * 2, z)
        elif (z > 0.5).any():
            z = z * 2
        return F.cross_entropy(z, y)


class WeightNormBranch(torch.nn.Module):
    """A branch on a parameter's value, which training changes."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        if self.linear.weight.norm() > 1.0:
            x = x * 0.5
        return F.cross_entropy(self.linear(x), y)


class LabelList(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        rows = [i for i, label in enumerate(y.tolist()) if label > 0]
        return F.cross_entropy(self.linear(x[rows]), y[rows])


class LayerDrop(torch.nn.Module):
    """A layer skipped at random (fairseq's LayerDrop), which PyTorch decides anew each step."""

    def __init__(self):
        super().__init__()
        self.linear, self.head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)

    def forward(self, x, y):
        if torch.rand(()) >= 0.3:
            x = torch.relu(self.linear(x))
        return F.cross_entropy(self.head(x), y)


@pytest.mark.parametrize("module, line, origin, what", [
    (CountNormalised(), "max((y > 0).sum().item(), 1)", "input 'y'", "a Python number"),
    (Branching(), "elif (z > 0.5).any():", "input 'x', 'linear.bias', 'linear.weight'",
     "a Python bool"),
    (WeightNormBranch(), "if self.linear.weight.norm() > 1.0:", "'linear.weight'",
     "a Python bool"),
    (LabelList(), "for i, label in enumerate(y.tolist())", "input 'y'", "a Python list"),
    (LayerDrop(), "if torch.rand(()) >= 0.3:", "a random draw", "a Python bool"),
])
def test_a_value_read_from_the_data_is_refused(module, line, origin, what):
    with pytest.raises(ampc.Error) as error:
        ampc.compile(module, feed(6, [1])[0], precision="fp32", optimizer="sgd")
    message = str(error.value)
    assert "\n" not in message
    assert f"computed from {origin} as {what}" in message
    assert "test_data_dependent_values.py:" in message and line in message
    assert "the plan would use it on every step" in message


@pytest.mark.parametrize("module", [CountNormalised(as_tensor=True), Branching(as_tensor=True)])
def test_the_same_computation_in_tensor_ops_trains_as_pytorch(module):
    # The example batch has another count of positives (and branch) than some later ones.
    torch.manual_seed(0)
    batches = feed(6, [1, 2, 3, 4])
    assert len({int((b["y"] > 0).sum()) for b in batches}) > 1
    assert_states_close(*train_with_sgd(module, batches, lr=0.1))


class SizesChecksAndLibraries(torch.nn.Module):
    """What a forward may convert: sizes (as torchvision's RAFT compares its images' sizes),
    values made of constants, an `assert` and torch's own checks (torch._assert,
    torch.distributions' argument validation), and anything under is_in_onnx_export."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        z = self.linear(x)
        rows, half = int(x.size(0)), x.shape[1] // 2
        if (rows, half) != x.shape[:1] + (2,):
            raise ValueError("unexpected shape")
        assert torch.isfinite(z).all(), "non-finite scores"
        torch._assert((z.abs() < 1e6).all(), "huge scores")
        normal = torch.distributions.Normal(z, F.softplus(z) + 0.1)
        if not torch.onnx.is_in_onnx_export():
            print(z.max().item())
        zero = x.new_zeros(()).item() + float(torch.zeros_like(x).sum())
        return (F.cross_entropy(z, y) - 0.01 * normal.log_prob(z.detach()).mean()
                + zero + len(x) * 0)


def test_sizes_checks_and_library_validation_train_as_pytorch():
    torch.manual_seed(0)
    assert_states_close(*train_with_sgd(SizesChecksAndLibraries(), feed(6, [1, 2, 3]), lr=0.1))
