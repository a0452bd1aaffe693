"""torch.nn's loss functions through ampc.export (python/ampc/_losses.py): those torch 1.13's
exporter refuses (MSE, L1, smooth L1, Huber, BCE, label smoothing, the margin and embedding
losses, Poisson NLL, triplet) and those it exports as another function (BCE with logits, which
overflows from logits of about 17; pairwise_distance and cdist, without the absolute value and
with a gradient of 0 / 0 at a zero distance), and some it exports as they compute (KL
divergence, NLL with class weights, Gaussian NLL). Each model trains as PyTorch float64 does,
stepped by torch.optim.SGD; reductions "none" are weighted so that every element counts."""

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import ampc
from pytorch_reference import assert_states_close, train_with_sgd

N, C = 8, 5


class Heads(nn.Module):
    """Three linear heads of x (logits, a second and a third embedding) and a per-class weight
    buffer, handed to `loss(a, b, c, y, w)`; `scale` makes the first head's values large."""

    def __init__(self, loss, scale=1.0):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(6, C), nn.Linear(6, C), nn.Linear(6, C)
        self.register_buffer("w", torch.linspace(0.5, 1.5, C))
        self.loss, self.scale = loss, scale

    def forward(self, x, y):
        return self.loss(self.a(x) * self.scale, self.b(x), self.c(x), y, self.w)


def _targets():
    g = torch.Generator().manual_seed(1)
    classes = torch.randint(0, C, (N,), generator=g)
    classes[2] = 3  # an ignored target where ignore_index=3
    return {
        "classes": classes,
        "signs": (torch.randint(0, 2, (N,), generator=g) * 2 - 1).float(),
        "binary": torch.randint(0, 2, (N, C), generator=g).float(),
        "probabilities": torch.softmax(torch.randn(N, C, generator=g), 1),
        "counts": torch.randint(0, 4, (N, C), generator=g).float(),
        "lists": torch.tensor([[1, 3, -1, 0, 0], [0, -1, 2, 2, 2], [4, 3, 2, 1, 0],
                               [2, 2, -1, 1, 1]] * (N // 4)),
    }


def _weighted(loss):
    """A reduction "none" result averaged with distinct weights per element."""
    return (loss * torch.linspace(0.5, 1.5, loss.numel()).view(loss.shape)).mean()


CASES = {
    "mse": (lambda a, b, c, y, w: F.mse_loss(a, y), "probabilities"),
    "mse_sum_broadcast": (lambda a, b, c, y, w: F.mse_loss(a, y[:1], reduction="sum"),
                          "probabilities"),
    "mse_legacy_size_average": (lambda a, b, c, y, w: F.mse_loss(a, y, size_average=False) / C,
                                "probabilities"),
    "mse_of_two_outputs": (lambda a, b, c, y, w: nn.MSELoss()(a, b) + 0 * y.sum(), "probabilities"),
    "l1": (lambda a, b, c, y, w: nn.L1Loss()(a, y), "probabilities"),
    "l1_none": (lambda a, b, c, y, w: _weighted(F.l1_loss(a, y, reduction="none")),
                "probabilities"),
    "smooth_l1": (lambda a, b, c, y, w: nn.SmoothL1Loss()(a, 3 * y), "probabilities"),
    "smooth_l1_beta": (lambda a, b, c, y, w: F.smooth_l1_loss(a, 3 * y, beta=0.3),
                       "probabilities"),
    "smooth_l1_beta_0": (lambda a, b, c, y, w: F.smooth_l1_loss(a, 3 * y, beta=0.0),
                         "probabilities"),
    "huber": (lambda a, b, c, y, w: nn.HuberLoss(delta=0.5)(a, 3 * y), "probabilities"),
    "huber_none": (lambda a, b, c, y, w: _weighted(F.huber_loss(a, 3 * y, reduction="none")),
                   "probabilities"),
    "bce": (lambda a, b, c, y, w: nn.BCELoss()(torch.sigmoid(a), y), "binary"),
    "bce_weight_sum": (lambda a, b, c, y, w: F.binary_cross_entropy(
        torch.sigmoid(a), y, weight=w, reduction="sum"), "binary"),
    "bce_with_logits": (lambda a, b, c, y, w: nn.BCEWithLogitsLoss()(a, y), "binary"),
    "bce_with_logits_weights": (lambda a, b, c, y, w: F.binary_cross_entropy_with_logits(
        a, y, weight=w, pos_weight=2 * w), "binary"),
    "bce_with_logits_soft_none": (lambda a, b, c, y, w: _weighted(
        F.binary_cross_entropy_with_logits(a, y, reduction="none")), "probabilities"),
    "cross_entropy_smoothing": (lambda a, b, c, y, w: nn.CrossEntropyLoss(label_smoothing=0.3)(
        a, y), "classes"),
    "cross_entropy_smoothing_weight_ignore": (lambda a, b, c, y, w: F.cross_entropy(
        a, y, weight=w, ignore_index=3, label_smoothing=0.1), "classes"),
    "cross_entropy_smoothing_ignore_none": (lambda a, b, c, y, w: _weighted(F.cross_entropy(
        a, y, ignore_index=3, label_smoothing=0.3, reduction="none")), "classes"),
    "cross_entropy_smoothing_weight_sum": (lambda a, b, c, y, w: F.cross_entropy(
        a, y, weight=w, reduction="sum", label_smoothing=0.2), "classes"),
    "cross_entropy_smoothing_probabilities": (lambda a, b, c, y, w: F.cross_entropy(
        a, y, weight=w, label_smoothing=0.1), "probabilities"),
    "cross_entropy_smoothing_spatial": (lambda a, b, c, y, w: F.cross_entropy(
        a.view(2, 4, C).transpose(1, 2), y.view(2, 4), weight=w, ignore_index=3,
        label_smoothing=0.1), "classes"),
    "soft_margin": (lambda a, b, c, y, w: nn.SoftMarginLoss()(a[:, 0], y), "signs"),
    "hinge_embedding": (lambda a, b, c, y, w: F.hinge_embedding_loss(a[:, 0], y, margin=0.5),
                        "signs"),
    "margin_ranking": (lambda a, b, c, y, w: nn.MarginRankingLoss(margin=0.1)(
        a[:, 0], b[:, 0], y), "signs"),
    "cosine_embedding": (lambda a, b, c, y, w: nn.CosineEmbeddingLoss(margin=0.2)(a, b, y),
                         "signs"),
    "kl_div_batchmean": (lambda a, b, c, y, w: F.kl_div(F.log_softmax(a, 1), y,
                                                       reduction="batchmean"), "probabilities"),
    "kl_div_log_target_sum": (lambda a, b, c, y, w: nn.KLDivLoss(reduction="sum", log_target=True)(
        F.log_softmax(a, 1), F.log_softmax(b, 1)) + 0 * y.sum(), "probabilities"),
    "nll_weight_ignore": (lambda a, b, c, y, w: F.nll_loss(F.log_softmax(a, 1), y, weight=w,
                                                           ignore_index=3), "classes"),
    "gaussian_nll": (lambda a, b, c, y, w: F.gaussian_nll_loss(a, y, F.softplus(b) + 0.1),
                     "probabilities"),
    "gaussian_nll_full_shared_variance": (lambda a, b, c, y, w: nn.GaussianNLLLoss(
        full=True, eps=1e-3)(a, y, F.softplus(b[:, :1])), "probabilities"),
    "poisson_nll": (lambda a, b, c, y, w: nn.PoissonNLLLoss()(a, y), "counts"),
    "poisson_nll_rates_full": (lambda a, b, c, y, w: F.poisson_nll_loss(
        a.exp(), y + 0.5, log_input=False, full=True), "counts"),
    "multi_margin": (lambda a, b, c, y, w: nn.MultiMarginLoss()(a, y), "classes"),
    "multi_margin_squared_weight": (lambda a, b, c, y, w: F.multi_margin_loss(
        a, y, p=2, margin=0.7, weight=w), "classes"),
    "multilabel_margin": (lambda a, b, c, y, w: nn.MultiLabelMarginLoss()(a, y), "lists"),
    "multilabel_margin_none": (lambda a, b, c, y, w: _weighted(F.multilabel_margin_loss(
        a, y, reduction="none")), "lists"),
    "triplet": (lambda a, b, c, y, w: nn.TripletMarginLoss(margin=3.0)(a, b, c) * y.abs().mean(),
                "signs"),
    "triplet_l1_swap": (lambda a, b, c, y, w: F.triplet_margin_loss(
        a, b, c, margin=3.0, p=1, swap=True) * y.abs().mean(), "signs"),
    "triplet_with_distance": (lambda a, b, c, y, w: F.triplet_margin_with_distance_loss(
        a, b, c, margin=5.0, swap=True) * y.abs().mean(), "signs"),
    "pairwise_distance_p3": (lambda a, b, c, y, w: (F.pairwise_distance(a, b, p=3) * y).sum(),
                             "signs"),
    "pairwise_distance_l1_keepdim": (lambda a, b, c, y, w: (nn.PairwiseDistance(
        p=1, keepdim=True)(a, b) * y[:, None]).sum(), "signs"),
    "pairwise_distance_max": (lambda a, b, c, y, w: (F.pairwise_distance(
        a, b, p=math.inf) * y).sum(), "signs"),
    "cdist": (lambda a, b, c, y, w: (torch.cdist(a, b) * y).sum(), "signs"),
    "cdist_l1": (lambda a, b, c, y, w: (torch.cdist(a, b, p=1) * y).sum(), "signs"),
    "cdist_p3_batched": (lambda a, b, c, y, w: torch.cdist(
        a.view(2, 4, C), b.view(2, 4, C), p=3).mean() * y.abs().mean(), "signs"),
    # cdist(a, a): zero distances on the diagonal, whose gradient PyTorch makes 0
    "cdist_with_itself": (lambda a, b, c, y, w: (torch.cdist(a, a) * y).sum(), "signs"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_trains_as_pytorch(name):
    torch.manual_seed(0)
    loss, target = CASES[name]
    x = torch.randn(N, 6)
    feed = [{"x": x, "y": _targets()[target]}] * 3
    assert_states_close(*train_with_sgd(Heads(loss), feed, lr=0.1))


@pytest.mark.parametrize("name, loss", [
    # log(sigmoid(40)) and log(1 - sigmoid(40)): torch's export is -inf there
    ("bce_with_logits", lambda a, y: F.binary_cross_entropy_with_logits(a, y)),
    ("soft_margin", lambda a, y: F.soft_margin_loss(a, 2 * y - 1)),
])
def test_large_logits_keep_a_finite_loss(name, loss):
    torch.manual_seed(0)
    x = torch.randn(N, 6)
    feed = [{"x": x, "y": _targets()["binary"]}] * 2
    net = Heads(lambda a, b, c, y, w: loss(a, y), scale=40.0)
    assert_states_close(*train_with_sgd(net, feed, lr=1e-3), tol=1e-5)


def test_losses_train_in_half_precision():
    """A regression and multi-label model (MSE, smooth L1, BCE with logits) in fp16 and bf16:
    no step skipped, and the losses of 8 Adam steps within the precision's reach of fp32's."""
    torch.manual_seed(0)
    net = Heads(lambda a, b, c, y, w: F.mse_loss(b, y) + F.smooth_l1_loss(c, 2 * y)
                + F.binary_cross_entropy_with_logits(a, y))
    x = torch.randn(N, 6)
    y = _targets()["binary"]
    losses = {}
    for precision in ("fp32", "fp16", "bf16"):
        trainer = ampc.compile(net, {"x": x, "y": y}, precision=precision, optimizer="adam",
                               lr=1e-2)
        steps = [trainer.step(x=x, y=y) for _ in range(8)]
        assert not any(s.skipped for s in steps), precision
        losses[precision] = np.array([s.loss for s in steps])
    assert losses["fp32"][-1] < losses["fp32"][0] - 0.1
    np.testing.assert_allclose(losses["fp16"], losses["fp32"], rtol=5e-3)
    np.testing.assert_allclose(losses["bf16"], losses["fp32"], rtol=3e-2)
