"""torch.nn's loss functions (and the distances they use) as ampc's exporter traces them (a
rewrite of _tracing.py): torch.onnx.export (torch 1.13) cannot export most of them, and
exports three others as another function.

Not exportable by torch, written here with the formulas of PyTorch's kernels (reduction
"none", "mean" or "sum", and the legacy size_average / reduce arguments, as PyTorch takes
them):

- F.mse_loss, F.l1_loss, F.smooth_l1_loss (beta), F.huber_loss (delta);
- F.binary_cross_entropy (probabilities; each log clamped at -100 as PyTorch does; weight);
- F.cross_entropy with label_smoothing > 0: (1 - e) times the loss without smoothing plus
  e / C times the smoothing term, which PyTorch averages over the targets' weights (class
  indices) or the elements (probabilities, smoothed before the loss);
- F.soft_margin_loss, F.margin_ranking_loss, F.hinge_embedding_loss,
  F.cosine_embedding_loss, F.poisson_nll_loss (log_input, full), F.multi_margin_loss (p 1
  or 2, margin, weight), F.multilabel_margin_loss (targets ended by -1),
  F.triplet_margin_loss (p, eps, swap) and F.triplet_margin_with_distance_loss with its
  default distance.

Exported by torch as another function, so written here as well:

- F.binary_cross_entropy_with_logits: torch writes log(sigmoid(x)) and log(1 - sigmoid(x)),
  which are -inf from |x| of about 17 (a NaN loss where PyTorch's is finite); here
  (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x), PyTorch's form;
- F.pairwise_distance and torch.cdist: torch writes (sum (x1 - x2)^p)^(1 / (p + eps)), with
  no absolute value (NaN for odd p, the signed sum for p = 1) and another exponent; here
  PyTorch's ||x1 - x2 + eps||_p and ||x1_i - x2_j||_p, whose gradient is 0 where a distance is
  0 (cdist(x, x)'s diagonal), as PyTorch's backward makes it.

A loss is computed in the precision of its inputs where ampc's autocast leaves them low, as
any user-written loss would be; its reductions and logarithms are fp32 (docs/training.md).
"""

import math

from . import _tracing
from ._unexportable_ops import _arguments


def _reduction(a):
    """The reduction a loss call asks for, the legacy size_average / reduce included."""
    from torch.nn import _reduction

    if a.get("size_average") is not None or a.get("reduce") is not None:
        return _reduction.legacy_get_string(a.get("size_average"), a.get("reduce"))
    return a.get("reduction", "mean")


def _reduced(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _mse(args, kwargs):
    a = _arguments(("input", "target", "size_average", "reduce", "reduction"), args, kwargs)
    d = a["input"] - a["target"]
    return _reduced(d * d, _reduction(a))


def _l1(args, kwargs):
    a = _arguments(("input", "target", "size_average", "reduce", "reduction"), args, kwargs)
    return _reduced((a["input"] - a["target"]).abs(), _reduction(a))


def _smooth_l1(args, kwargs):
    import torch

    a = _arguments(("input", "target", "size_average", "reduce", "reduction", "beta"),
                   args, kwargs)
    beta = float(a.get("beta", 1.0))
    z = (a["input"] - a["target"]).abs()
    if beta == 0.0:
        return _reduced(z, _reduction(a))
    return _reduced(torch.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), _reduction(a))


def _huber(args, kwargs):
    import torch

    a = _arguments(("input", "target", "reduction", "delta"), args, kwargs)
    delta = float(a.get("delta", 1.0))
    z = (a["input"] - a["target"]).abs()
    loss = torch.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
    return _reduced(loss, a.get("reduction", "mean"))


def _binary_cross_entropy(args, kwargs):
    a = _arguments(("input", "target", "weight", "size_average", "reduce", "reduction"),
                   args, kwargs)
    x, y, w = a["input"], a["target"], a.get("weight")
    loss = -(y * x.log().clamp_min(-100.0) + (1 - y) * (1 - x).log().clamp_min(-100.0))
    if w is not None:
        loss = loss * w
    return _reduced(loss, _reduction(a))


def _binary_cross_entropy_with_logits(args, kwargs):
    import torch.nn.functional as F

    a = _arguments(("input", "target", "weight", "size_average", "reduce", "reduction",
                    "pos_weight"), args, kwargs)
    x, y, w, pw = a["input"], a["target"], a.get("weight"), a.get("pos_weight")
    minus_log_sigmoid = F.softplus(-x)  # -log(sigmoid(x)), finite for every finite x
    if pw is not None:
        minus_log_sigmoid = ((pw - 1) * y + 1) * minus_log_sigmoid
    loss = (1 - y) * x + minus_log_sigmoid
    if w is not None:
        loss = loss * w
    return _reduced(loss, _reduction(a))


def _class_axis_view(w, x, class_dim):
    """A per-class vector `w` shaped to broadcast along `x`'s class axis."""
    shape = [1] * x.dim()
    shape[class_dim] = -1
    return w.view(shape)


def _cross_entropy(args, kwargs):
    """F.cross_entropy with label smoothing (NOT_HANDLED without: torch exports that)."""
    import torch
    import torch.nn.functional as F

    a = _arguments(("input", "target", "weight", "size_average", "ignore_index", "reduce",
                    "reduction", "label_smoothing"), args, kwargs)
    e = float(a.get("label_smoothing", 0.0))
    if e == 0.0:
        return _tracing.NOT_HANDLED
    x, y, w = a["input"], a["target"], a.get("weight")
    reduction, ignore = _reduction(a), a.get("ignore_index", -100)
    class_dim = 0 if x.dim() == 1 else 1
    classes = x.shape[class_dim]
    if y.is_floating_point():  # probabilities: smoothed, then the loss without smoothing
        return F.cross_entropy(x, y * (1 - e) + e / classes, weight=w, reduction=reduction)
    logp = F.log_softmax(x, class_dim)
    nll = F.nll_loss(logp, y, weight=w, ignore_index=ignore, reduction=reduction)
    weighted = logp if w is None else logp * _class_axis_view(w, logp, class_dim)
    kept = y != ignore
    kept_count = kept.to(logp.dtype)
    smooth = -weighted.sum(class_dim) * kept_count
    if reduction == "mean":
        if w is None:
            smooth = smooth.sum() / kept_count.sum()
        else:  # over the kept targets' weights, as nll_loss's mean
            safe = torch.where(kept, y, torch.zeros_like(y))
            smooth = smooth.sum() / (w[safe] * kept_count).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return (1 - e) * nll + smooth * (e / classes)


def _soft_margin(args, kwargs):
    import torch.nn.functional as F

    a = _arguments(("input", "target", "size_average", "reduce", "reduction"), args, kwargs)
    # log(1 + exp(-y x)), PyTorch's, as a softplus that stays finite where exp overflows
    return _reduced(F.softplus(-a["target"] * a["input"]), _reduction(a))


def _margin_ranking(args, kwargs):
    a = _arguments(("input1", "input2", "target", "margin", "size_average", "reduce",
                    "reduction"), args, kwargs)
    margin = a.get("margin", 0.0)
    loss = (-a["target"] * (a["input1"] - a["input2"]) + margin).clamp_min(0)
    return _reduced(loss, _reduction(a))


def _hinge_embedding(args, kwargs):
    import torch

    a = _arguments(("input", "target", "margin", "size_average", "reduce", "reduction"),
                   args, kwargs)
    x, y, margin = a["input"], a["target"], a.get("margin", 1.0)
    zeros = torch.zeros_like(x)
    loss = (torch.where(y != 1, (margin - x).clamp_min(0), zeros)
            + torch.where(y != -1, x, zeros))
    return _reduced(loss, _reduction(a))


def _cosine_embedding(args, kwargs):
    import torch

    a = _arguments(("input1", "input2", "target", "margin", "size_average", "reduce",
                    "reduction"), args, kwargs)
    x1, x2, y, margin = a["input1"], a["input2"], a["target"], a.get("margin", 0.0)
    axis = x1.dim() - 1
    eps = 1e-12  # PyTorch's, added to each squared magnitude
    cos = (x1 * x2).sum(axis) / (((x1 * x1).sum(axis) + eps) * ((x2 * x2).sum(axis) + eps)).sqrt()
    zeros = torch.zeros_like(cos)
    loss = (torch.where(y == 1, 1 - cos, zeros)
            + torch.where(y == -1, (cos - margin).clamp_min(0), zeros))
    return _reduced(loss, _reduction(a))


def _poisson_nll(args, kwargs):
    import torch

    a = _arguments(("input", "target", "log_input", "full", "size_average", "eps", "reduce",
                    "reduction"), args, kwargs)
    x, y = a["input"], a["target"]
    if a.get("log_input", True):
        loss = x.exp() - y * x
    else:
        loss = x - y * (x + a.get("eps", 1e-8)).log()
    if a.get("full", False):  # Stirling's term, where the target is above 1
        safe = torch.where(y > 1, y, torch.ones_like(y))
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + torch.where(y > 1, stirling, torch.zeros_like(stirling))
    return _reduced(loss, _reduction(a))


def _one_hot_mask(y, classes, like):
    """[N, classes] with 1 at each row's class `y` (PyTorch's multi-class target)."""
    import torch

    return (y.unsqueeze(1) == torch.arange(classes).unsqueeze(0)).to(like.dtype)


def _multi_margin(args, kwargs):
    a = _arguments(("input", "target", "p", "margin", "weight", "size_average", "reduce",
                    "reduction"), args, kwargs)
    x, y, w = a["input"], a["target"], a.get("weight")
    p, margin = a.get("p", 1), a.get("margin", 1.0)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    squeeze = x.dim() == 1
    if squeeze:
        x, y = x.unsqueeze(0), y.reshape(1)
    classes = x.shape[1]
    z = (margin - x.gather(1, y.unsqueeze(1)) + x).clamp_min(0)
    h = z if p == 1 else z * z
    if w is not None:
        h = h * w[y].unsqueeze(1)
    loss = (h * (1 - _one_hot_mask(y, classes, x))).sum(1) / classes
    return _reduced(loss[0] if squeeze else loss, _reduction(a))


def _multilabel_margin(args, kwargs):
    import torch

    a = _arguments(("input", "target", "size_average", "reduce", "reduction"), args, kwargs)
    x, y = a["input"], a["target"]
    squeeze = x.dim() == 1
    if squeeze:
        x, y = x.unsqueeze(0), y.unsqueeze(0)
    classes = x.shape[1]
    listed = (y == -1).long().cumsum(1) == 0  # the targets before the first -1
    safe = torch.where(listed, y, torch.zeros_like(y))
    named = (safe.unsqueeze(2) == torch.arange(classes)) & listed.unsqueeze(2)
    is_target = named.to(x.dtype).sum(1) > 0
    pairs = (1 - x.gather(1, safe).unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)
    mask = listed.unsqueeze(2) & ~is_target.unsqueeze(1)  # [N, listed j, other class k]
    loss = (pairs * mask.to(x.dtype)).sum((1, 2)) / classes
    return _reduced(loss[0] if squeeze else loss, _reduction(a))


def _norm_of_last_axis(d, p, keepdim):
    """||d||_p over the last axis, with gradient 0 where the norm is 0 (PyTorch's masks)."""
    import torch

    axis = d.dim() - 1
    p = float(p)
    if p == math.inf:
        return d.abs().amax(axis, keepdim=keepdim)
    if p == -math.inf:
        return d.abs().amin(axis, keepdim=keepdim)
    if p == 0.0:
        return (d != 0).to(d.dtype).sum(axis, keepdim=keepdim)
    if p == 1.0:
        return d.abs().sum(axis, keepdim=keepdim)
    power = d * d if p == 2.0 else d.abs().pow(p)
    total = power.sum(axis, keepdim=keepdim)
    positive = total > 0
    safe = torch.where(positive, total, torch.ones_like(total))  # no 1/0 in the gradient
    root = safe.sqrt() if p == 2.0 else safe.pow(1.0 / p)
    return torch.where(positive, root, torch.zeros_like(root))


def _pairwise(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    if max(x1.dim(), x2.dim()) == 0:
        raise ValueError("pairwise_distance of scalars")
    d = x1 - x2 + eps
    return _norm_of_last_axis(d, p, keepdim)


def _pairwise_distance(args, kwargs):
    a = _arguments(("x1", "x2", "p", "eps", "keepdim"), args, kwargs)
    return _pairwise(a["x1"], a["x2"], a.get("p", 2.0), a.get("eps", 1e-6),
                     a.get("keepdim", False))


def _cdist(args, kwargs):
    a = _arguments(("x1", "x2", "p", "compute_mode"), args, kwargs)
    x1, x2 = a["x1"], a["x2"]
    return _norm_of_last_axis(x1.unsqueeze(-2) - x2.unsqueeze(-3), a.get("p", 2.0), False)


def _triplet(anchor, positive, negative, margin, distance, swap, reduction):
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(distance(positive, negative))
    return _reduced((margin + d_pos - d_neg).clamp_min(0), reduction)


def _triplet_margin(args, kwargs):
    a = _arguments(("anchor", "positive", "negative", "margin", "p", "eps", "swap",
                    "size_average", "reduce", "reduction"), args, kwargs)
    p, eps = a.get("p", 2.0), a.get("eps", 1e-6)
    return _triplet(a["anchor"], a["positive"], a["negative"], a.get("margin", 1.0),
                    lambda u, v: _pairwise(u, v, p, eps), a.get("swap", False), _reduction(a))


def _triplet_with_distance(args, kwargs):
    a = _arguments(("anchor", "positive", "negative"), args, kwargs)
    if a.get("distance_function") is not None:
        return _tracing.NOT_HANDLED  # the user's distance, traced as torch traces it
    return _triplet(a["anchor"], a["positive"], a["negative"], a.get("margin", 1.0),
                    _pairwise, a.get("swap", False), a.get("reduction", "mean"))


def _rewrites():
    import torch
    import torch.nn.functional as F

    return {F.mse_loss: _mse, F.l1_loss: _l1, F.smooth_l1_loss: _smooth_l1,
            F.huber_loss: _huber, F.binary_cross_entropy: _binary_cross_entropy,
            F.binary_cross_entropy_with_logits: _binary_cross_entropy_with_logits,
            F.cross_entropy: _cross_entropy, F.soft_margin_loss: _soft_margin,
            F.margin_ranking_loss: _margin_ranking, F.hinge_embedding_loss: _hinge_embedding,
            F.cosine_embedding_loss: _cosine_embedding, F.poisson_nll_loss: _poisson_nll,
            F.multi_margin_loss: _multi_margin, F.multilabel_margin_loss: _multilabel_margin,
            F.pairwise_distance: _pairwise_distance, torch.pairwise_distance: _pairwise_distance,
            torch.cdist: _cdist, F.triplet_margin_loss: _triplet_margin,
            F.triplet_margin_with_distance_loss: _triplet_with_distance}


# The losses and distances above (a rewrite of _tracing.py).
rewrite = _tracing.dispatch(_rewrites)
