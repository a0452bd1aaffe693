"""nn.Embedding's training options through ampc.export (python/ampc/_embedding.py), against
PyTorch float64 stepped by torch.optim: padding_idx (which a plain torch.onnx.export trains
like any other row) leaves its row where it is, scale_grad_by_freq (which torch refuses to
export) divides each row's gradient by its count in the batch, and max_norm (whose in-place
renormalisation no file carries) is refused by name. A plain torch.onnx.export of padding_idx
compiles with a warning naming the lookup and its row (passes/lost_padding_rows.h), and the
fix it names, masking the lookups in the model, trains as PyTorch does from a plain file."""

import copy
import io
import warnings

import pytest
import torch
import torch.nn.functional as F

import ampc

# Index 0 (the padding row below) and 2 occur several times per batch, 7 never.
TOKENS = torch.tensor([[0, 1, 2, 2], [3, 0, 0, 5], [2, 2, 2, 9]])
LABELS = torch.tensor([0, 1, 2])


class Bag(torch.nn.Module):
    """nn.Embedding with `options`; with functional_padding_idx, F.embedding called with it
    as given (nn.Embedding counts a negative index from the end itself, F.embedding later)."""

    def __init__(self, functional_padding_idx=None, **options):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4, **options)
        self.head = torch.nn.Linear(4, 3)
        self.functional_padding_idx = functional_padding_idx

    def forward(self, tokens, y):
        if self.functional_padding_idx is None:
            e = self.embed(tokens)
        else:
            e = F.embedding(tokens, self.embed.weight, padding_idx=self.functional_padding_idx)
        return F.cross_entropy(self.head(e.mean(1)), y)


def train_both(net, optimizer, steps=3):
    """`net` trained by ampc and a float64 copy by torch.optim on the same batch; the two
    state dicts."""
    reference = copy.deepcopy(net).double()
    batch = {"tokens": TOKENS, "y": LABELS}
    if optimizer == "sgd":
        trainer = ampc.compile(net, batch, precision="fp32", optimizer="sgd", lr=0.5,
                               momentum=0.9)
        opt = torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9)
    else:
        trainer = ampc.compile(net, batch, precision="fp32", optimizer="adam", lr=0.05)
        opt = torch.optim.Adam(reference.parameters(), lr=0.05)
    for _ in range(steps):
        trainer.step(**batch)
        opt.zero_grad()
        reference(TOKENS, LABELS).backward()
        opt.step()
    trainer.copy_to(net)
    return net.state_dict(), reference.state_dict()


@pytest.mark.parametrize("options,optimizer", [
    ({"padding_idx": 0}, "sgd"),
    ({"padding_idx": -10}, "adam"),  # row 0 again, counted from the end
    ({"functional_padding_idx": -10}, "sgd"),
    ({"scale_grad_by_freq": True}, "sgd"),
    ({"padding_idx": 0, "scale_grad_by_freq": True}, "adam"),
])
def test_embedding_options_train_as_in_pytorch(options, optimizer):
    torch.manual_seed(0)
    net = Bag(**options)
    before = net.embed.weight.detach().clone()
    ours, want = train_both(net, optimizer)
    for name, value in want.items():
        diff = (ours[name].double() - value).abs().max().item()
        assert diff < 2e-6, f"{name}: {diff}"
    if "padding_idx" in options or "functional_padding_idx" in options:
        assert torch.equal(ours["embed.weight"][0], before[0])
    assert torch.equal(ours["embed.weight"][7], before[7])  # never looked up


def test_an_embedding_with_max_norm_is_refused():
    with pytest.raises(ampc.Error, match="nn.Embedding with max_norm=1.0.*in place"):
        ampc.compile(Bag(max_norm=1.0), {"tokens": TOKENS, "y": LABELS}, precision="fp32",
                     optimizer="sgd", lr=0.5)


class MaskedBag(Bag):
    """Bag with its padding row kept untrained by the model itself, as the warning says."""

    def forward(self, tokens, y):
        e = self.embed(tokens) * (tokens != 0).unsqueeze(-1)
        return F.cross_entropy(self.head(e.mean(1)), y)


def plain_export(net, tmp_path):
    """The file torch.onnx.export writes of `net` (padding_idx dropped, with torch's warning)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (TOKENS, LABELS), buf, input_names=["tokens", "y"],
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    path = tmp_path / "plain.onnx"
    path.write_bytes(buf.getvalue())
    return str(path)


def compile_warnings(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = ampc.compile(path, precision="fp32", optimizer="sgd", lr=0.5, momentum=0.9)
    return trainer, [str(w.message) for w in caught if w.category is UserWarning]


def test_a_plain_export_of_padding_idx_warns_naming_the_lookup_and_its_row(tmp_path):
    torch.manual_seed(0)
    _, said = compile_warnings(plain_export(Bag(padding_idx=3), tmp_path))
    assert len(said) == 1, said
    assert said[0].startswith("node '/embed/Gather' (Gather): row 3 of 'embed.weight' is all "
                              "zeros, as nn.Embedding(padding_idx=3) starts its padding row"), said
    assert "export with ampc.export" in said[0] and "(tokens != 3)" in said[0], said


@pytest.mark.parametrize("net", [Bag(), MaskedBag(padding_idx=0)], ids=["no_padding", "masked"])
def test_no_warning_without_padding_idx_or_with_the_models_own_mask(net, tmp_path):
    assert compile_warnings(plain_export(net, tmp_path))[1] == []


def test_no_warning_from_ampc_export(tmp_path):
    ampc.export(Bag(padding_idx=0), {"tokens": TOKENS, "y": LABELS}, tmp_path / "a.onnx")
    assert compile_warnings(str(tmp_path / "a.onnx"))[1] == []


def test_the_masked_lookup_from_a_plain_export_trains_as_padding_idx_in_pytorch(tmp_path):
    torch.manual_seed(0)
    net = MaskedBag(padding_idx=0)
    reference = Bag(padding_idx=0).double()
    reference.load_state_dict(net.state_dict())
    trainer, _ = compile_warnings(plain_export(net, tmp_path))
    opt = torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9)
    for _ in range(3):
        trainer.step(tokens=TOKENS, y=LABELS)
        opt.zero_grad()
        reference(TOKENS, LABELS).backward()
        opt.step()
    trainer.copy_to(net)
    for name, value in reference.state_dict().items():
        diff = (net.state_dict()[name].double() - value).abs().max().item()
        assert diff < 2e-6, f"{name}: {diff}"
    assert not net.embed.weight[0].any()
