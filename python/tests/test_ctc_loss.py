"""F.ctc_loss / nn.CTCLoss, which torch 1.13's exporter cannot export, through ampc.export
(python/ampc/_ctc_loss.py: the alpha recursion unrolled over the frames). Each model trains as
PyTorch float64 does (its own CTC kernel), stepped by torch.optim.SGD: padded and
concatenated targets, repeated labels (a blank must separate them), the lengths as inputs of
the graph or as lists, every reduction, another blank, an empty target, an input too short
for its target, unbatched inputs."""

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, double_inputs, train_with_sgd

FRAMES, BATCH, FEATURES, CLASSES = 12, 3, 5, 6


class Recognizer(nn.Module):
    """A GRU and a linear layer over the frames, log_softmax, then CTC with `options`."""

    def __init__(self, **options):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, 8)
        self.out = nn.Linear(8, CLASSES)
        self.options = options

    def log_probs(self, x):
        return self.out(self.rnn(x)[0]).log_softmax(-1)

    def forward(self, x, targets, input_lengths, target_lengths):
        return F.ctc_loss(self.log_probs(x), targets, input_lengths, target_lengths,
                          **self.options)


class WeightedPerSample(Recognizer):
    """reduction="none", each sample's loss weighted differently (so each must be right)."""

    def forward(self, x, targets, input_lengths, target_lengths):
        losses = F.ctc_loss(self.log_probs(x), targets, input_lengths, target_lengths,
                            reduction="none")
        return (losses * torch.tensor([1.0, 0.5, 2.0], dtype=losses.dtype)).sum()


class ListLengths(Recognizer):
    """nn.CTCLoss with the lengths as Python lists (constants of the graph)."""

    def forward(self, x, targets):
        return nn.CTCLoss()(self.log_probs(x), targets, [12, 10, 9], [4, 3, 2])


class Unbatched(Recognizer):
    """One utterance: log_probs [T, C], targets [S]."""

    def forward(self, x, targets):
        return F.ctc_loss(self.log_probs(x[:, 0]), targets, torch.tensor(FRAMES - 1),
                          torch.tensor(3))


PADDED = torch.tensor([[1, 1, 2, 3], [2, 2, 2, 0], [5, 4, 0, 0]])  # repeated labels
LENGTHS = {"input_lengths": torch.tensor([12, 10, 9]), "target_lengths": torch.tensor([4, 3, 2])}

CASES = {
    # name: (model, inputs besides x)
    "padded_mean": (Recognizer, {"targets": PADDED, **LENGTHS}),
    "concatenated_targets": (Recognizer, {"targets": torch.tensor([1, 1, 2, 3, 2, 2, 2, 5, 4]),
                                          **LENGTHS}),
    "sum_last_blank": (lambda: Recognizer(reduction="sum", blank=CLASSES - 1),
                       {"targets": torch.tensor([[1, 1, 2, 3], [2, 2, 2, 0], [0, 4, 0, 0]]),
                        **LENGTHS}),
    "none_weighted": (WeightedPerSample, {"targets": PADDED, **LENGTHS}),
    "empty_target": (Recognizer, {"targets": PADDED, "input_lengths": LENGTHS["input_lengths"],
                                  "target_lengths": torch.tensor([4, 0, 2])}),
    # 4 frames cannot align 2, 2, 2 (5 are needed): its loss and gradient are zeroed.
    "zero_infinity": (lambda: Recognizer(zero_infinity=True),
                      {"targets": PADDED, "input_lengths": torch.tensor([12, 4, 9]),
                       "target_lengths": LENGTHS["target_lengths"]}),
    "list_lengths_module": (ListLengths, {"targets": PADDED}),
    "unbatched": (Unbatched, {"targets": torch.tensor([3, 3, 1])}),
}


def _batches(inputs, count=3):
    g = torch.Generator().manual_seed(1)
    return [{"x": torch.randn(FRAMES, BATCH, FEATURES, generator=g), **inputs}
            for _ in range(count)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_ctc_trains_as_pytorch(name):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    assert_states_close(*train_with_sgd(make(), _batches(inputs), lr=0.2))


@pytest.mark.parametrize("name", sorted(CASES))
def test_ctc_loss_values_are_pytorchs(name):
    """The loss itself (the gradients above cannot show a constant term: an empty target's
    two endings counted twice would add log 2)."""
    make, inputs = CASES[name]
    torch.manual_seed(0)
    net = make()
    reference = copy.deepcopy(net).double()
    feed = _batches(inputs, 1)[0]
    trainer = ampc.compile(net, feed, precision="fp32", optimizer="sgd", lr=0.0)
    want = reference(**double_inputs(feed)).item()
    assert trainer.step(**feed).loss == pytest.approx(want, rel=1e-5)


def test_impossible_alignment_is_an_infinite_loss_whose_step_is_skipped():
    """As PyTorch: an infinite loss with a non-finite gradient, so the non-finite check skips
    the step (GradScaler's in PyTorch); without the check ampc stops at the loss."""
    feed = _batches({"targets": PADDED, "input_lengths": torch.tensor([12, 4, 9]),
                     "target_lengths": LENGTHS["target_lengths"]}, 1)[0]
    net = Recognizer()
    trainer = ampc.compile(net, feed, precision="fp32", optimizer="sgd", lr=0.1,
                           skip_nonfinite=True)
    before = trainer.state_dict()
    result = trainer.step(**feed)
    assert math.isinf(result.loss) and result.skipped
    for name, value in trainer.state_dict().items():
        assert (value == before[name]).all(), name
    trainer = ampc.compile(net, feed, precision="fp32", optimizer="sgd", lr=0.1)
    with pytest.raises(ampc.Error, match="the loss is inf"):
        trainer.step(**feed)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_ctc_trains_in_low_precision(precision):
    """The recursion's log-space minus infinity (a large finite number) stays in fp32 under
    autocast, as PyTorch keeps ctc_loss: finite losses that fall."""
    torch.manual_seed(0)
    feed = _batches({"targets": PADDED, **LENGTHS}, 1)[0]
    trainer = ampc.compile(Recognizer(), feed, precision=precision, optimizer="adam", lr=0.02,
                           init_scale=256.0)
    losses = [trainer.step(**feed).loss for _ in range(10)]
    assert all(math.isfinite(v) for v in losses), losses
    assert losses[-1] < 0.8 * losses[0], losses
