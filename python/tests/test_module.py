"""ampc.compile from a torch.nn.Module and from files; state_dict, copy_to; torch tensors and
numpy arrays give the same step; inputs bind to forward's parameters by name. PyTorch is the
oracle of the forward loss."""

import copy

import numpy as np
import pytest
import torch

import ampc
from conftest import MLP, batches


class TinyNet(torch.nn.Module):
    """Not one of models/: two Linear layers with a Tanh, cross-entropy."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(64, 24)
        self.out = torch.nn.Linear(24, 10)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.out(torch.tanh(self.hidden(x))), y)


@pytest.fixture(scope="module")
def net_and_trainer(digits):
    torch.manual_seed(0)
    net = TinyNet()
    x, y = digits
    trainer = ampc.compile(net, {"x": torch.from_numpy(x[:32]), "y": torch.from_numpy(y[:32])},
                           precision="fp32", optimizer="sgd", lr=0.1)
    return net, trainer


def test_compile_from_module(net_and_trainer):
    net, trainer = net_and_trainer
    assert trainer.inputs == {"x": ("f32", (32, 64)), "y": ("i64", (32,))}
    # The export keeps torch's names, and the initial weights are the module's.
    assert trainer.steps_done == 0
    state = trainer.state_dict()
    assert sorted(state) == sorted(name for name, _ in net.named_parameters())
    for name, p in net.named_parameters():
        np.testing.assert_array_equal(state[name], p.detach().numpy())


def test_copy_to_gives_the_plans_loss(net_and_trainer, digits):
    net, trainer = net_and_trainer
    x, y = digits
    for bx, by in batches(x, y, 20):
        trainer.step(x=bx, y=by)
    copied = trainer.copy_to(net)
    assert sorted(copied) == sorted(trainer.state_dict())
    held_x, held_y = x[-96:], y[-96:]
    plan = trainer.eval(x=held_x, y=held_y)
    assert plan["samples"] == 96
    with torch.no_grad():
        # PyTorch in float64 on the copied weights: the oracle.
        net64 = TinyNet().double()
        net64.load_state_dict({k: v.double() for k, v in net.state_dict().items()})
        loss = net64(torch.from_numpy(held_x).double(), torch.from_numpy(held_y)).item()
        scores = net64.out(torch.tanh(net64.hidden(torch.from_numpy(held_x).double())))
        accuracy = (scores.argmax(1).numpy() == held_y).mean()
    assert plan["loss"] == pytest.approx(loss, rel=1e-5)
    assert plan["accuracy"] == pytest.approx(accuracy)
    # Training moved the weights, so the loss is below the untrained one.
    assert loss < np.log(10)


def test_compile_from_onnx_file_fp16(digits):
    trainer = ampc.compile(MLP, optimizer="adam", lr=1e-3)  # precision fp16 by default
    x, y = digits
    r = trainer.step(x=x[:32], y=y[:32])
    assert r.scale == 65536.0 and r.skipped is False and r.step == 1
    assert isinstance(r.grad_norm, float) and r.grad_norm > 0
    assert np.isfinite(r.loss) and float(r) == r.loss


def test_state_dict_round_trip(tmp_path, net_and_trainer):
    _, trainer = net_and_trainer
    plan = tmp_path / "net.plan"
    trainer.save_plan(plan)
    other = ampc.compile(plan)
    halved = {k: v * np.float32(0.5) for k, v in trainer.state_dict().items()}
    other.load_state_dict(halved)
    for name, value in other.state_dict().items():
        np.testing.assert_array_equal(value, halved[name])
    # torch tensors (a module's state_dict) load too, and a missing key is refused (strict).
    other.load_state_dict({k: torch.from_numpy(v) for k, v in trainer.state_dict().items()})
    for name, value in other.state_dict().items():
        np.testing.assert_array_equal(value, trainer.state_dict()[name])
    with pytest.raises(ampc.Error, match="missing 'out.bias'"):
        other.load_state_dict({k: v for k, v in halved.items() if k != "out.bias"})
    # A wrong shape is refused naming the state, and nothing changed.
    bad = dict(halved, **{"out.bias": np.zeros(11, np.float32)})
    with pytest.raises(ampc.Error, match="state 'out.bias' must be f32\\[10\\], got f32\\[11\\]"):
        other.load_state_dict(bad)
    np.testing.assert_array_equal(other.state_dict()["hidden.weight"],
                                  trainer.state_dict()["hidden.weight"])


def test_torch_tensor_and_numpy_array_give_the_same_step(tmp_path, mlp_plan, digits):
    x, y = digits
    a, b = ampc.compile(mlp_plan), ampc.compile(mlp_plan)
    for bx, by in batches(x, y, 3):
        ra = a.step(x=bx, y=by)
        rb = b.step({"x": torch.from_numpy(bx.copy()), "y": torch.from_numpy(by.copy())})
        assert ra == rb
    for name, value in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[name], value)


class SequenceFirst(torch.nn.Module):
    """nn.GRU's default layout: x [T, B, F] beside labels [B], and a scalar temperature."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(4, 6)
        self.head = torch.nn.Linear(6, 3)

    def forward(self, x, y, temperature):
        return torch.nn.functional.cross_entropy(self.head(self.rnn(x)[0][-1]) / temperature, y)


def test_inputs_without_a_common_batch_axis_step_as_compiled():
    """Without accumulation step() takes the plan's shapes as they are; the loss is
    PyTorch's. Accumulation cuts micro-batches along a shared first axis: refused by name."""
    torch.manual_seed(0)
    net = SequenceFirst()
    batch = {"x": torch.randn(5, 2, 4), "y": torch.tensor([0, 2]), "temperature": torch.tensor(2.0)}
    trainer = ampc.compile(net, batch, precision="fp32", optimizer="sgd", lr=0.1)
    assert trainer.batch_size is None
    assert {n: s for n, (_, s) in trainer.inputs.items()} == {
        "x": (5, 2, 4), "y": (2,), "temperature": ()}
    with torch.no_grad():
        want = net(**batch).item()
    assert trainer.step(**batch).loss == pytest.approx(want, rel=1e-6)
    with pytest.raises(ampc.Error, match="inputs disagree on the batch size|needs a static shape with a batch axis"):
        ampc.compile(net, batch, precision="fp32", optimizer="sgd", lr=0.1, accum_steps=2)


def assert_steps_are_pytorchs(trainer, reference, feed, lr, loss=None):
    """Each ampc SGD step's loss is PyTorch's on the same batch, `reference` stepped by
    torch.optim.SGD alongside (its loss `loss(reference, batch)`, default reference(**batch))."""
    sgd = torch.optim.SGD(reference.parameters(), lr=lr)
    for batch in feed:
        sgd.zero_grad()
        want = reference(**batch) if loss is None else loss(reference, batch)
        want.backward()
        sgd.step()
        assert trainer.step(**batch).loss == pytest.approx(want.item(), rel=1e-5)


class OptionalInputs(torch.nn.Module):
    """forward with optional inputs and a float default, as attention layers have them."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, y, mask=None, scale=None, temperature=2.0):
        h = self.linear(x) / temperature
        if mask is not None:
            h = h + mask
        if scale is not None:
            h = h * scale
        return torch.nn.functional.cross_entropy(h, y)


@pytest.mark.parametrize("given", [(), ("scale",), ("mask",), ("mask", "scale")])
def test_inputs_given_by_name_bind_to_their_parameters(given):
    """Each input binds to the parameter of its name, not to the next position (`scale`
    alone once bound to `mask`); the defaults left out stay forward's (the float
    `temperature` once became an input of the file that step() asked for). The loss of every
    step is PyTorch's, each SGD step as torch.optim's."""
    torch.manual_seed(0)
    net = OptionalInputs()
    g = torch.Generator().manual_seed(3)
    feed = [{"x": torch.randn(6, 4, generator=g), "y": torch.randint(0, 3, (6,), generator=g),
             **{n: torch.rand(6, 3, generator=g) + 0.5 for n in given}} for _ in range(3)]
    reference = copy.deepcopy(net)
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1)
    assert set(trainer.inputs) == {"x", "y", *given}
    assert_steps_are_pytorchs(trainer, reference, feed, lr=0.1)


def test_a_required_input_left_out_is_named():
    class Required(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x, mask, y):
            return torch.nn.functional.cross_entropy(self.linear(x) * mask, y)

    with pytest.raises(TypeError, match="example_inputs has no 'mask', a parameter of "
                                        "Required.forward without a default"):
        ampc.compile(Required(), {"x": torch.randn(2, 4), "y": torch.tensor([0, 1])})


class WithOutputs(torch.nn.Module):
    """forward returning its loss beside other values, as training code often does."""

    def __init__(self, form):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.form = form

    def forward(self, x, y):
        scores = self.linear(x)
        losses = torch.nn.functional.cross_entropy(scores, y, reduction="none")
        if self.form == "tuple":
            return losses.mean(), scores
        if self.form == "dict":
            return {"logits": scores, "loss": losses.mean()}
        return losses  # not reduced: refused


@pytest.mark.parametrize("form", ["tuple", "dict"])
def test_the_loss_is_the_tuples_first_or_the_dicts_loss(form):
    torch.manual_seed(0)
    net = WithOutputs(form)
    batch = {"x": torch.randn(6, 4), "y": torch.tensor([0, 1, 2, 0, 1, 2])}
    reference = copy.deepcopy(net)
    trainer = ampc.compile(net, batch, precision="fp32", optimizer="sgd", lr=0.5)
    key = 0 if form == "tuple" else "loss"
    assert_steps_are_pytorchs(trainer, reference, [batch] * 2, lr=0.5,
                              loss=lambda module, b: module(**b)[key])


def test_a_loss_that_is_not_a_scalar_is_refused():
    with pytest.raises(ampc.Error, match=r"forward's loss must be a float scalar, not float32 "
                                         r"of shape \[6\]"):
        ampc.compile(WithOutputs("none"), {"x": torch.randn(6, 4), "y": torch.zeros(6).long()})


class Configured(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x, double, y, mode="sum"):
        scores = self.linear(x * 2 if double else x)
        return torch.nn.functional.cross_entropy(scores, y, reduction=mode)


def test_python_values_in_the_example_are_constants_of_the_plan():
    """A bool or a string in example_inputs is forward's configuration, passed as it is (torch
    would make it an input of the file); the plan takes the tensors only."""
    torch.manual_seed(0)
    net = Configured()
    batch = {"x": torch.randn(6, 4), "y": torch.tensor([0, 1, 2, 0, 1, 2])}
    reference = copy.deepcopy(net)
    trainer = ampc.compile(net, {**batch, "double": True, "mode": "mean"}, precision="fp32",
                           optimizer="sgd", lr=0.5)
    assert set(trainer.inputs) == {"x", "y"}
    assert_steps_are_pytorchs(trainer, reference, [batch] * 2, lr=0.5,
                              loss=lambda module, b: module(b["x"], True, b["y"], mode="mean"))


def test_a_list_of_tensors_as_an_input_is_refused_in_one_line():
    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, xs, y):
            return torch.nn.functional.cross_entropy(self.linear(xs[0] + xs[1]), y)

    x = torch.randn(2, 4)
    with pytest.raises(ampc.Error, match="input 'xs' is a list of tensors: a plan takes one "
                                         "tensor per input"):
        ampc.compile(Pair(), {"xs": [x, x], "y": torch.tensor([0, 1])})
