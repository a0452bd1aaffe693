"""F.ctc_loss / nn.CTCLoss (speech and handwriting recognition) as ampc's exporter traces it (a
rewrite of _tracing.py): torch.onnx.export (torch 1.13) has no symbolic for aten::ctc_loss.

The loss is PyTorch's: the negative log-likelihood of the target over every alignment of the
input's frames (Graves et al. 2006), by the forward (alpha) recursion in log space over the
extended target (blank, l1, blank, l2, ..., blank). ampc's plans have no loops, so the
recursion is unrolled over the T frames of the traced log_probs (T steps of a few elementwise
ops on [N, 2S + 1]); its gradient is autodiff's of those steps, which equals PyTorch's
whenever log_probs come from log_softmax, as CTC expects (PyTorch's backward assumes it and
returns exp(log_probs) - posterior, the gradient with respect to the logits).

- input_lengths and target_lengths may be tensors (inputs of the graph, a batch at a time)
  or lists: a sample's frames from its input length on leave its alphas as they are;
- targets padded [N, S] or concatenated (1-D, sum(target_lengths) labels, each sample's at
  the cumulative sum of the lengths before it, at most T of them read per sample: a longer
  target cannot be aligned); padding labels are never read;
- reduction "mean" (each loss over its target length, at least 1, then the batch mean),
  "sum" or "none"; zero_infinity.

An impossible alignment (input shorter than the target needs) has an infinite loss and a
non-finite gradient as in PyTorch (zero_infinity=True zeroes both, as in PyTorch), so that a
loss scaler or --skip-nonfinite skips the step as PyTorch's GradScaler does. The log-space
"minus infinity" of the recursion is a large finite negative number, so that no gradient of a
log-sum-exp over unreachable states is NaN.
"""

from . import _tracing
from ._unexportable_ops import _arguments, _constant, _static

# log(0) of the recursion: finite, so that exp(NEG - max) is 0 and no gradient is NaN; far
# below any reachable log-likelihood (T frames of log-probabilities above -1e4 each).
NEG = -1.0e30
# A log-likelihood below this is an impossible alignment (one of NEG or a sum with NEG).
IMPOSSIBLE = -1.0e29


def _lengths(v, n):
    """input_lengths / target_lengths as an int64 tensor of n values (a list's as a constant)."""
    import torch

    if isinstance(v, torch.Tensor):
        return v.to(torch.int64).reshape(n)
    return _constant(list(v) if isinstance(v, (list, tuple)) else [v] * n, torch.int64)


def _padded_targets(targets, target_lengths, n, frames):
    """The targets as [n, S] labels (S static): as they are when 2-D, gathered from the
    concatenated 1-D form at each sample's offset (S = min(total, frames))."""
    import torch

    if targets.dim() == 2:
        return targets
    total = _static(targets.shape)[0]
    width = max(1, min(total, frames))
    offsets = torch.cumsum(target_lengths, 0) - target_lengths
    index = offsets.unsqueeze(1) + torch.arange(width).unsqueeze(0)
    return targets[index.clamp(0, max(total - 1, 0))]


def _extended(targets, blank, classes):
    """The extended labels [N, 2S + 1] (blanks between and around the targets) and the mask of
    the positions the recursion may reach from two back (a label unlike the one before it)."""
    import torch

    n, s = _static(targets.shape)
    labels = targets.to(torch.int64).clamp(0, classes - 1)  # padding labels are never read
    blanks = torch.full((n, s), blank, dtype=torch.int64)
    ext = torch.stack([blanks, labels], 2).reshape(n, 2 * s)
    ext = torch.cat([ext, torch.full((n, 1), blank, dtype=torch.int64)], 1)
    skip = torch.zeros((n, 2 * s + 1), dtype=torch.bool)
    if s > 1:
        odd = ext[:, 3::2] != ext[:, 1:-2:2]  # label i unlike label i - 1
        skip = torch.cat([torch.zeros((n, 3), dtype=torch.bool),
                          torch.stack([odd, torch.zeros_like(odd)], 2).reshape(n, -1)], 1)
        skip = skip[:, : 2 * s + 1]
    return ext, skip


def _predecessors(width):
    """The [3, width] positions of each extended position's predecessors (itself, one and two
    back) in the alphas with two NEG columns in front: one Gather per frame reads all three."""
    import torch

    position = torch.arange(width)
    return torch.stack([position + 2, position + 1, position])


def _log_likelihoods(log_probs, ext, skip, input_lengths, target_lengths):
    """log p(target | input) of each sample by the unrolled alpha recursion. Each frame is a
    few ops on [N, 3, 2S + 1] (torch's exporter takes time quadratic in the node count)."""
    import torch

    frames, n, _ = _static(log_probs.shape)
    width = _static(ext.shape)[1]
    emit = torch.gather(log_probs, 2, ext.unsqueeze(0).expand(frames, n, width))
    position = torch.arange(width).unsqueeze(0)
    neg = torch.full_like(emit[0], NEG)
    zero = torch.zeros_like(neg)
    # Two back is a path only onto a label unlike the one before it.
    penalty = torch.stack([zero, zero, torch.where(skip, zero, neg)], 1)
    before = _predecessors(width)
    front = neg[:, :2]
    alive = (torch.arange(frames).unsqueeze(1) < input_lengths.unsqueeze(0)).unsqueeze(2)
    # Before any frame only position 0 (the empty prefix) has probability 1; it is the
    # answer for an empty input, whose likelihood is 1 for an empty target and 0 otherwise.
    alpha = torch.where(alive[0], torch.where(position < 2, emit[0], neg),
                        torch.where(position == 0, zero, neg))
    for t in range(1, frames):
        paths = torch.cat([front, alpha], 1)[:, before] + penalty
        alpha = torch.where(alive[t], torch.logsumexp(paths, 1) + emit[t], alpha)
    last = (2 * target_lengths).unsqueeze(1)
    label = torch.gather(alpha, 1, (last - 1).clamp_min(0))
    label = torch.where(target_lengths.unsqueeze(1) > 0, label, neg[:, :1])
    ends = torch.cat([torch.gather(alpha, 1, last), label], 1)
    return torch.logsumexp(ends, 1)


def _ctc_loss(args, kwargs):
    import torch

    a = _arguments(("log_probs", "targets", "input_lengths", "target_lengths", "blank",
                    "reduction", "zero_infinity"), args, kwargs)
    log_probs, targets = a["log_probs"], a["targets"]
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.reshape(1, -1)
    frames, n, classes = _static(log_probs.shape)
    input_lengths = _lengths(a["input_lengths"], n)
    target_lengths = _lengths(a["target_lengths"], n)
    padded = _padded_targets(targets, target_lengths, n, frames)
    ext, skip = _extended(padded, int(a.get("blank", 0)), classes)
    likelihood = _log_likelihoods(log_probs, ext, skip, input_lengths, target_lengths)
    # An impossible alignment's loss: -likelihood (about 1e30) times infinity is PyTorch's
    # infinite loss, with a non-finite gradient as PyTorch's NaN (a loss scaler's or
    # --skip-nonfinite's check skips the step); times 0 it is zero_infinity's zero loss with
    # a zero gradient.
    ones = torch.ones_like(likelihood)
    factor = ones * (0.0 if a.get("zero_infinity", False) else float("inf"))
    loss = -likelihood * torch.where(likelihood < IMPOSSIBLE, factor, ones)
    reduction = a.get("reduction", "mean")
    if reduction == "mean":
        return (loss / target_lengths.clamp_min(1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss[0] if unbatched else loss


def rewrite(func, args, kwargs):
    """F.ctc_loss (a rewrite of _tracing.py)."""
    import torch.nn.functional as F

    return _ctc_loss(args, kwargs) if func is F.ctc_loss else _tracing.NOT_HANDLED
