"""ampc.compile of a module trains what torch.optim would train and nothing else: buffers
(register_buffer, a loss's pos_weight and class weights, BatchNorm's running statistics) and
parameters with requires_grad=False are exported as initializers like the parameters, and
must stay as PyTorch leaves them. PyTorch in float64, stepped by torch.optim.SGD, is the
oracle."""

import copy

import numpy as np
import pytest
import torch

import ampc
from conftest import batches, run_cli

CLASSES = 10


class WithUntrainedState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, 64))
        self.frozen = torch.nn.Linear(64, 16)
        self.frozen.requires_grad_(False)
        self.norm = torch.nn.BatchNorm1d(16)
        self.head = torch.nn.Linear(16, CLASSES)
        self.ce = torch.nn.CrossEntropyLoss(weight=torch.linspace(0.5, 2.0, CLASSES))
        self.bce = torch.nn.BCEWithLogitsLoss(pos_weight=torch.linspace(2.0, 0.5, CLASSES))

    def forward(self, x, y, t):
        scores = self.head(self.norm(torch.tanh(self.frozen(x + self.offset))))
        return self.ce(scores, y) + self.bce(scores, t)


def one_hot(y):
    return np.eye(CLASSES, dtype=np.float32)[y]


@pytest.fixture(scope="module")
def trained(digits):
    torch.manual_seed(0)
    net = WithUntrainedState()
    reference = copy.deepcopy(net).double()
    x, y = digits
    feed = [{"x": bx, "y": by, "t": one_hot(by)} for bx, by in batches(x, y, 5)]
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1, momentum=0.9)
    for b in feed:
        trainer.step(**b)
    sgd = torch.optim.SGD([p for p in reference.parameters() if p.requires_grad], lr=0.1,
                          momentum=0.9)
    # BatchNorm's running statistics are PyTorch's own update (the unbiased batch variance),
    # which ampc.compile of a module follows (docs/training.md).
    for b in feed:
        sgd.zero_grad()
        reference(*(torch.from_numpy(b[k]).double() if k != "y" else torch.from_numpy(b[k])
                    for k in ("x", "y", "t"))).backward()
        sgd.step()
    return net, trainer, reference


def test_only_what_torch_trains_is_trained_state(trained):
    net, trainer, _ = trained
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    running = {"norm.running_mean", "norm.running_var"}
    assert set(trainer.state_dict()) == trainable | running


def test_state_follows_torch_optim(trained):
    _, trainer, reference = trained
    want = reference.state_dict()
    for name, value in trainer.state_dict().items():
        np.testing.assert_allclose(value, want[name].numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_copy_to_leaves_untrained_state(trained):
    net, trainer, _ = trained
    before = {k: v.clone() for k, v in net.state_dict().items()}
    copied = trainer.copy_to(net)
    assert set(copied) == set(trainer.state_dict())
    for name in ("offset", "frozen.weight", "frozen.bias", "ce.weight", "bce.pos_weight"):
        assert torch.equal(net.state_dict()[name], before[name]), name


def test_user_patterns_are_kept(digits):
    torch.manual_seed(0)
    net = WithUntrainedState()
    x, y = digits
    trainer = ampc.compile(net, {"x": x[:32], "y": y[:32], "t": one_hot(y[:32])},
                           precision="fp32", freeze="head.b*")
    assert "head.bias" not in trainer.state_dict()
    assert "head.weight" in trainer.state_dict()


def test_compile_leaves_the_module_as_it_was(tmp_path, digits):
    # torch.onnx.export runs the forward once, which advances BatchNorm's running statistics
    # and its batch counter: neither the module nor the export may keep that batch.
    torch.manual_seed(0)
    net = WithUntrainedState()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    x, y = digits
    path = tmp_path / "net.onnx"
    trainer = ampc.compile(net, {"x": x[:32], "y": y[:32], "t": one_hot(y[:32])},
                           precision="fp32", export_path=path)
    for name, value in net.state_dict().items():
        assert torch.equal(value, before[name]), name
    for name in ("norm.running_mean", "norm.running_var"):
        np.testing.assert_array_equal(trainer.state_dict()[name], before[name].numpy())
    import onnx
    from onnx import numpy_helper

    exported = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    np.testing.assert_array_equal(exported["norm.running_var"], before["norm.running_var"].numpy())


def test_a_plain_torch_export_does_not_know_its_buffers(tmp_path, digits):
    # torch.onnx.export alone writes buffers like parameters: from such a file (the command
    # line's case) every float initializer is trained, the loss's class weights are refused
    # with the --freeze that fixes it, and frozen they compile.
    torch.manual_seed(0)
    x, y = digits
    path = tmp_path / "net.onnx"
    example = tuple(torch.from_numpy(a) for a in (x[:32], y[:32], one_hot(y[:32])))
    torch.onnx.export(WithUntrainedState(), example, str(path), input_names=["x", "y", "t"],
                      output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    with pytest.raises(ampc.Error, match="class weights must be constant; 'ce.weight' is trained "
                       "as a parameter: .* freeze it \\(--freeze 'ce.weight'\\)"):
        ampc.compile(path, precision="fp32")
    trainer = ampc.compile(path, precision="fp32", freeze=["ce.weight", "bce.pos_weight"])
    assert "ce.weight" not in trainer.state_dict()
    assert "frozen.weight" in trainer.state_dict()  # requires_grad=False is not in the file


def test_ampc_export_records_what_torch_does_not_train(tmp_path, digits):
    # ampc.export lists the buffers and frozen parameters in the file's metadata, which the
    # command line honours: the same state as ampc.compile of the module.
    torch.manual_seed(0)
    net = WithUntrainedState()
    x, y = digits
    path = tmp_path / "net.onnx"
    ampc.export(net, {"x": x[:32], "y": y[:32], "t": one_hot(y[:32])}, path)
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert sorted(props["ampc.untrained"].split("\n")) == sorted(
        ["frozen.weight", "frozen.bias", "offset", "norm.running_mean", "norm.running_var",
         "ce.weight", "bce.pos_weight"])
    plan = tmp_path / "net.plan"
    run_cli("compile", path, "--train", "-o", plan)
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert set(ampc.compile(plan).state_dict()) == trainable | {"norm.running_mean",
                                                                "norm.running_var"}


@pytest.mark.parametrize("choice", ["biased", "unbiased"])
def test_running_variance_choice(digits, choice):
    # batchnorm_running_var="biased" keeps ONNX's update (the batch's population variance),
    # computed here from the batches BatchNorm saw; "unbiased" is PyTorch's (n / (n - 1) times
    # it), the default for a module.
    torch.manual_seed(0)
    net = WithUntrainedState()
    x, y = digits
    feed = [{"x": bx, "y": by, "t": one_hot(by)} for bx, by in batches(x, y, 3)]
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1,
                           batchnorm_running_var=choice)
    reference = copy.deepcopy(net).double()
    sgd = torch.optim.SGD([p for p in reference.parameters() if p.requires_grad], lr=0.1)
    running_var = reference.norm.running_var.clone()
    for b in feed:
        trainer.step(**b)
        seen = {}
        hook = reference.norm.register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
        sgd.zero_grad()
        reference(*(torch.from_numpy(b[k]).double() if k != "y" else torch.from_numpy(b[k])
                    for k in ("x", "y", "t"))).backward()
        sgd.step()
        hook.remove()
        batch_var = seen["x"].detach().var(0, unbiased=choice == "unbiased")
        running_var = 0.9 * running_var + 0.1 * batch_var
    np.testing.assert_allclose(trainer.state_dict()["norm.running_var"], running_var.numpy(),
                               rtol=1e-5, atol=1e-7)


def test_running_variance_choice_is_checked(digits):
    x, y = digits
    with pytest.raises(ampc.Error, match="batchnorm_running_var 'sample'"):
        ampc.compile(WithUntrainedState(), {"x": x[:32], "y": y[:32], "t": one_hot(y[:32])},
                     precision="fp32", batchnorm_running_var="sample")


class Siamese(torch.nn.Module):
    """One encoder with a BatchNorm applied to two views (SimCLR, BYOL, any weight-shared
    branch): PyTorch updates the running statistics after each call."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.BatchNorm1d(16),
                                           torch.nn.ReLU(), torch.nn.Linear(16, 8))

    def forward(self, a, b):
        return (self.encoder(a) - self.encoder(b)).pow(2).mean()


@pytest.mark.parametrize("sync", [False, True], ids=["plain", "sync_batchnorm"])
def test_a_module_applied_twice_updates_its_statistics_after_each_call(tmp_path, digits, sync):
    torch.manual_seed(0)
    net = Siamese()
    reference = copy.deepcopy(net).double()
    x, _ = digits
    feed = [{"a": x[k * 16:(k + 1) * 16], "b": 2 * x[(k + 3) * 16:(k + 4) * 16] + 1}
            for k in range(3)]
    if sync:
        # --sync-batchnorm (a plan for data parallel, run here by one process: a world of one
        # rank, where the global batch statistics are the batch's).
        path, plan = tmp_path / "siamese.onnx", tmp_path / "siamese.plan"
        ampc.export(net, feed[0], path)
        run_cli("compile", path, "--train", "--target", "cpu", "--data-parallel",
                "--sync-batchnorm", "--optimizer", "sgd", "--lr", "0.1", "-o", plan)
        trainer = ampc.compile(str(plan))
    else:
        trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1)
    sgd = torch.optim.SGD(reference.parameters(), lr=0.1)
    for b in feed:
        trainer.step(**b)
        sgd.zero_grad()
        reference(*(torch.from_numpy(b[k]).double() for k in ("a", "b"))).backward()
        sgd.step()
    state = trainer.state_dict()
    for name, want in reference.state_dict().items():
        if want.is_floating_point():
            np.testing.assert_allclose(state[name], want.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=name)


class WritesBuffers(torch.nn.Module):
    """A forward that writes buffers besides BatchNorm's statistics, and reads them after the
    write: an EMA centre (DINO's, an EMA codebook's) updated under no_grad, an integer step
    counter and a buffer overwritten through .data.copy_. torch's export drops the writes
    (and a plain trace of .data loses the last one);
    ampc.export lists them (ampc.buffer_updates)."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(64, 8)
        self.norm = torch.nn.BatchNorm1d(8)
        self.register_buffer("center", torch.zeros(8))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("last", torch.zeros(8))

    def forward(self, x):
        h = self.norm(self.layer(x))
        # Read through ops whose backward does not keep `last` itself: PyTorch's backward would
        # see the write through .data below (it bypasses autograd's version check).
        loss = ((h - self.center) ** 2).mean() + ((h - self.last) ** 2).mean()
        with torch.no_grad():
            self.center.mul_(0.9).add_(0.1 * h.mean(0))
        self.steps += 1
        # A whole-buffer copy through .data, as an EMA codebook is written.
        self.last.data.copy_(h.pow(2).mean(0).data)
        return loss + (h * self.center).mean() + 0.01 * self.steps.float() * h.mean()


def test_buffers_the_forward_writes_follow_pytorch(tmp_path, digits):
    torch.manual_seed(0)
    net = WritesBuffers()
    reference = copy.deepcopy(net).double()
    x, _ = digits
    feed = [{"x": x[k * 16:(k + 1) * 16]} for k in range(4)]
    path = tmp_path / "writes.onnx"
    ampc.export(net, feed[0], path)
    assert ampc.inspect(str(path))["metadata"]["ampc.buffer_updates"] == "center\nsteps\nlast"
    assert "ampc.buffer_updates: 3 names" in run_cli("inspect", path).stdout
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1)
    sgd = torch.optim.SGD(reference.parameters(), lr=0.1)
    for b in feed:
        trainer.step(**b)
        sgd.zero_grad()
        reference(torch.from_numpy(b["x"]).double()).backward()
        sgd.step()
    state = trainer.state_dict()
    assert int(state["steps"]) == 4
    for name, want in reference.state_dict().items():
        if want.is_floating_point():
            np.testing.assert_allclose(state[name], want.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=name)
    trainer.copy_to(net)
    assert int(net.steps) == 4


def test_a_batch_norm_with_a_cumulative_average_is_refused():
    """momentum=None averages every batch so far; torch exports it as momentum 0 (the last
    batch's statistics only), so ampc.export refuses it by name rather than train that."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3, momentum=None))

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x).pow(2).mean()

    with pytest.raises(ampc.Error, match=r"BatchNorm1d 'net.1' with momentum=None"):
        ampc.compile(Loss(), {"x": torch.randn(5, 4)}, precision="fp32", optimizer="sgd", lr=0.1)


class FineTuned(torch.nn.Module):
    """A backbone its user put in eval mode (BatchNorm on its running statistics, dropout off,
    as when fine-tuning a pretrained network) under a head trained in training mode."""

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                            torch.nn.ReLU(), torch.nn.Dropout(0.5))
        self.head = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.BatchNorm1d(4),
                                        torch.nn.Linear(4, 3))
        with torch.no_grad():
            self.backbone[1].running_mean.fill_(0.3)
            self.backbone[1].running_var.fill_(2.0)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.head(self.backbone(x).mean((2, 3))), y)


def test_a_submodule_in_eval_mode_is_trained_in_eval_mode():
    """Each module in the mode its user left it, as PyTorch's training loop runs it (a plain
    training-mode export would switch the backbone's BatchNorm to batch statistics and its
    dropout on): parameters and every running statistic after 3 SGD steps against PyTorch
    float64, and the modes as they were after compiling."""
    torch.manual_seed(0)
    net = FineTuned()
    net.train()
    net.backbone.eval()
    reference = copy.deepcopy(net).double()
    feed = [{"x": torch.randn(4, 3, 6, 6), "y": torch.tensor([0, 1, 2, 1])}] * 3
    trainer = ampc.compile(net, feed[0], precision="fp32", optimizer="sgd", lr=0.1)
    assert net.training and not any(m.training for m in net.backbone.modules())
    sgd = torch.optim.SGD(reference.parameters(), lr=0.1)
    for batch in feed:
        trainer.step(**batch)
        sgd.zero_grad()
        reference(**{k: v.double() if v.is_floating_point() else v
                     for k, v in batch.items()}).backward()
        sgd.step()
    ours = trainer.state_dict()
    want = reference.state_dict()
    for name, value in ours.items():
        np.testing.assert_allclose(value, want[name].numpy(), atol=2e-6, err_msg=name)
    # The eval-mode statistics are constants of the plan (PyTorch never updates them), the
    # training-mode ones state that moved as PyTorch's did.
    assert "backbone.1.running_mean" not in ours
    assert (want["backbone.1.running_mean"].float() == np.float32(0.3)).all()
    assert "head.1.running_mean" in ours and (ours["head.1.running_mean"] != 0).any()


def test_a_module_in_eval_mode_is_compiled_as_it_computes_with_a_warning():
    net = FineTuned()
    net.eval()
    batch = {"x": torch.randn(4, 3, 6, 6), "y": torch.tensor([0, 1, 2, 1])}
    with pytest.warns(UserWarning, match="in eval mode.*model.train"):
        trainer = ampc.compile(net, batch, precision="fp32", optimizer="sgd", lr=0.0)
    assert not net.training
    with torch.no_grad():
        want = net(**batch).item()
    assert trainer.step(**batch).loss == pytest.approx(want, rel=1e-5)
