"""nn.Embedding's training options through ampc.export (python/ampc/_embedding.py), against
PyTorch float64 stepped by torch.optim: padding_idx (which a plain torch.onnx.export trains
like any other row) leaves its row where it is, scale_grad_by_freq (which torch refuses to
export) divides each row's gradient by its count in the batch, and max_norm (whose in-place
renormalisation no file carries) is refused by name."""

import copy

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
