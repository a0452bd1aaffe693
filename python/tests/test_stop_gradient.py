"""Where PyTorch's autograd stops, ampc's backward stops: `.detach()`, results of ops under
torch.no_grad(), `.data`, which a plain torch.onnx.export loses and ampc.export records
(python/ampc/_stop_gradient.py). PyTorch in float64, stepped by torch.optim.SGD, is the
oracle."""

import copy
import io

import onnx
import pytest
import torch
import torch.nn.functional as F

import ampc
from conftest import run_cli

STEPS = 3


class Stops(torch.nn.Module):
    """A straight-through rounding, a target from the same layers under no_grad, a no_grad
    max (a torch.return_types result) of values that require grad, a tuple result under
    no_grad, a scale read through .data, a softmax of a detached value."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(5, 6)
        self.b = torch.nn.Linear(6, 6)

    def forward(self, x, y):
        h = torch.tanh(self.a(x))
        q = 2 * h
        ste = h + (q.round() / 2 - h).detach()
        out = self.b(ste)
        with torch.no_grad():
            target = y + self.b(torch.tanh(self.b(y))).relu()
            peak = out.max(1)
            lo, hi = torch.chunk(out, 2, dim=1)
        scale = self.a.weight.data.abs().mean()
        # Ops whose export reads the rank of a detached value.
        weights = torch.flatten(F.softmax(out.detach().unsqueeze(1), dim=-1), 1)
        return (((out - target) ** 2).mean() + (out * peak.values.unsqueeze(1)).mean()
                + (out * weights).sum(1).mean()
                + (out[:, :3] * hi).mean() - 0.1 * (out[:, 3:] * lo).mean()
                + scale * out.pow(2).mean())


def batches(n):
    g = torch.Generator().manual_seed(3)
    return [{"x": torch.randn(4, 5, generator=g), "y": torch.randn(4, 6, generator=g)}
            for _ in range(n)]


@pytest.mark.parametrize("caller_grad_mode", ["enabled", "no_grad"])
def test_training_follows_pytorch_where_autograd_stops(caller_grad_mode):
    """Also when ampc.compile is called under torch.no_grad(): the export traces the forward
    with gradients on, as the training step runs it."""
    torch.manual_seed(0)
    net = Stops()
    reference = copy.deepcopy(net).double()
    feed = batches(STEPS)
    with torch.set_grad_enabled(caller_grad_mode == "enabled"):
        trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.5)
    sgd = torch.optim.SGD(reference.parameters(), lr=0.5)
    for b in feed:
        trainer.step(**b)
        sgd.zero_grad()
        reference(*(b[k].double() for k in ("x", "y"))).backward()
        sgd.step()
    trainer.copy_to(net)
    ours, want = net.state_dict(), reference.state_dict()
    for name, value in want.items():
        diff = (ours[name].double() - value).abs().max().item()
        assert diff < 2e-6, f"{name}: {diff}"


def test_export_is_standard_onnx_with_the_stops_listed(tmp_path):
    path = tmp_path / "stops.onnx"
    ampc.export(Stops(), batches(1)[0], path)
    model = onnx.load(path)
    onnx.checker.check_model(model)
    assert [o.domain for o in model.opset_import] == [""]
    props = {p.key: p.value for p in model.metadata_props}
    listed = props["ampc.stop_gradient"].split("\n")
    identities = [n.output[0] for n in model.graph.node if n.op_type == "Identity"]
    # The detach; under no_grad both Gemms of y's branch (each reads parameters, which
    # require grad; the ops between them read only a detached value), out.max's values and
    # both chunks of out; .data; out.detach().
    assert len(listed) == 8, listed
    assert set(listed) <= set(identities)
    # `ampc inspect` shows them, in JSON as the file holds them.
    assert ampc.inspect(str(path))["metadata"]["ampc.stop_gradient"] == "\n".join(listed)
    text = run_cli("inspect", path).stdout
    assert "ampc.stop_gradient: 8 names (values where PyTorch's autograd stops)" in text, text


class Constants(torch.nn.Module):
    """torch.tensor(n) is traced as a detached constant, and an argmax's result is an integer
    detached by hand: neither can stop a gradient, so neither gets a marker, which would keep
    torch from folding sqrt(torch.tensor(n)) (a Sqrt of an int64 constant in the file; RAFT's
    correlation scale)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(5, 6)

    def forward(self, x, y):
        width = 6
        h = self.a(x) / torch.sqrt(torch.tensor(width))
        picked = h.argmax(1).detach()
        return ((h - y) ** 2).mean() + h.gather(1, picked[:, None]).mean() / width


def test_constants_and_integers_get_no_stop_marker(tmp_path):
    torch.manual_seed(0)
    net = Constants()
    path = tmp_path / "constants.onnx"
    ampc.export(net, batches(1)[0], path)
    model = onnx.load(path)
    assert {p.key: p.value for p in model.metadata_props}["ampc.stop_gradient"] == ""
    assert "Sqrt" not in [n.op_type for n in model.graph.node]
    reference = copy.deepcopy(net).double()
    b = batches(1)[0]
    trainer = ampc.compile(net, b, precision="fp32", optimizer="sgd", lr=0.5)
    trainer.step(**b)
    sgd = torch.optim.SGD(reference.parameters(), lr=0.5)
    reference(b["x"].double(), b["y"].double()).backward()
    sgd.step()
    trainer.copy_to(net)
    for name, value in reference.state_dict().items():
        assert (net.state_dict()[name].double() - value).abs().max().item() < 2e-6, name


def test_an_export_without_stops_says_so():
    """The key is written even when nothing stops: its presence tells the compiler that the
    file records where autograd stops, so Round has PyTorch's zero gradient."""

    class Rounding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([0.7, -1.2, 2.5]))

        def forward(self, x):
            return (self.w * x + torch.round(self.w * 3) * x).sum()

    net = Rounding()
    x = torch.tensor([1.0, 2.0, 3.0])
    trainer = ampc.compile(net, {"x": x}, precision="fp32", optimizer="sgd", lr=1.0)
    trainer.step(x=x)
    trainer.copy_to(net)
    torch.testing.assert_close(net.w.detach(), torch.tensor([0.7, -1.2, 2.5]) - x)


def plain_export(net, batch, tmp_path):
    """The file torch.onnx.export writes of `net` (no record of where autograd stops)."""
    buf = io.BytesIO()
    torch.onnx.export(net, (batch["x"], batch["y"]), buf, input_names=["x", "y"],
                      opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    path = tmp_path / "plain.onnx"
    path.write_bytes(buf.getvalue())
    return path


def test_a_plain_export_of_a_straight_through_estimator_is_refused(tmp_path):
    """torch.onnx.export loses the detach, so ampc cannot know the gradient is 1 and not 0;
    the refusal names the way out. The exporter's own detach symbolic is back after ampc's
    export (nothing of ampc's remains registered in torch)."""
    net = Stops()
    ampc.export(net, batches(1)[0], tmp_path / "first.onnx")
    path = plain_export(net, batches(1)[0], tmp_path)
    assert not any(n.op_type == "Identity" for n in onnx.load(path).graph.node)
    with pytest.raises(ampc.Error, match=r"computes a \+ \(b - a\).*export with ampc.export"):
        ampc.compile(str(path), precision="fp32", optimizer="sgd", lr=0.5)


class Rounded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(5, 6)

    def forward(self, x, y):
        return (torch.round(4 * self.a(x)) * self.a(y[:, :5])).mean()


def test_a_plain_export_differentiating_round_is_refused(tmp_path):
    """Without the record, a plain export's Round in the gradient's path could be the lost
    detach of a straight-through estimator in another form; the refusal names ampc.export,
    whose file gives Round PyTorch's zero gradient."""
    path = plain_export(Rounded(), batches(1)[0], tmp_path)
    with pytest.raises(ampc.Error, match="no gradient rule for operator 'Round'.*ampc.export"):
        ampc.compile(str(path), precision="fp32", optimizer="sgd", lr=0.5)


def test_a_plain_export_of_a_straight_through_threshold_is_refused(tmp_path):
    """h + ((h > 0) - h).detach() exports as h + (Cast(h > 0) - h), whose gradient is 0 where
    PyTorch's is 1: refused, naming the node's form and ampc.export; ampc.export's file
    trains."""

    class Threshold(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(5, 6)

        def forward(self, x, y):
            h = self.a(x)
            return ((h + ((h > 0).float() - h).detach() - y) ** 2).mean()

    b = batches(1)[0]
    path = plain_export(Threshold(), b, tmp_path)
    with pytest.raises(ampc.Error, match=r"computes a \+ \(b - a\).*export with ampc.export"):
        ampc.compile(str(path), precision="fp32", optimizer="sgd", lr=0.5)
    ampc.compile(Threshold(), b, precision="fp32", optimizer="sgd", lr=0.5)


def test_a_loss_computed_under_no_grad_says_why_it_trains_nothing():
    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(5, 6)

        def forward(self, x, y):
            with torch.no_grad():
                return ((self.a(x) - y) ** 2).mean()

    with pytest.raises(ampc.Error, match="does not depend on any trainable parameter: every "
                                         "path from one to it goes through a .detach.. or a "
                                         "torch.no_grad.. block"):
        ampc.compile(Frozen(), batches(1)[0], precision="fp32", optimizer="sgd", lr=0.5)
