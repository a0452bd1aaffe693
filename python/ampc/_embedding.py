"""nn.Embedding's training options, which torch.onnx.export (torch 1.13) loses or refuses,
traced by ampc's exporter (a rewrite of _tracing.py) so that the file trains as PyTorch does:

- `padding_idx=p`: PyTorch's backward gives row p no gradient; torch exports a plain Gather
  (with a warning only), so training from its file updates row p like any other. Traced as
  where(t == p, lookup in weight.detach(), lookup): the same values, and row p's gradient
  stops where _stop_gradient.py records the detach.
- `scale_grad_by_freq=True`: PyTorch divides each looked-up row's gradient by the number of
  times its index occurs in the batch; torch refuses to export it. Traced as
  lookup / c + (lookup - lookup / c).detach(), c the occurrences of each position's index (a
  scatter-add of ones over the indices, gathered back): the same values, the gradient / c.
- `max_norm`: PyTorch renormalises the looked-up rows of the weight in place before each
  lookup (a write to the parameter no ONNX file carries); torch exports the lookup alone.
  Refused by name.
"""

import inspect

from . import _tracing
from ._errors import export_error


def _padding_row_stopped(out, indices, weight, p):
    import torch
    import torch.nn.functional as F

    row = p + weight.shape[0] if p < 0 else p
    return torch.where((indices == row).unsqueeze(-1), F.embedding(indices, weight.detach()), out)


def _gradient_over_frequency(out, indices, weight):
    import torch

    flat = indices.reshape(-1)
    counts = torch.zeros(weight.shape[0], dtype=out.dtype).scatter_add(
        0, flat, torch.ones(flat.shape, dtype=out.dtype))
    c = counts[indices].unsqueeze(-1)
    scaled = out / c
    return scaled + (out - scaled).detach()


def rewrite(func, args, kwargs):
    """F.embedding with padding_idx or scale_grad_by_freq, traced as the module says above;
    max_norm refused."""
    import torch
    import torch.nn.functional as F

    if func is not F.embedding:
        return _tracing.NOT_HANDLED
    a = inspect.signature(F.embedding).bind(*args, **kwargs)
    a.apply_defaults()
    a = a.arguments
    if a["max_norm"] is not None:
        raise export_error(
            f"nn.Embedding with max_norm={a['max_norm']}: PyTorch renormalises the looked-up "
            "rows of its weight in place in each forward, which an ONNX file cannot carry "
            "(torch's export drops it); renormalise in the model instead, e.g. "
            "`w = weight * (max_norm / weight.norm(dim=1, keepdim=True)).clamp(max=1)` "
            "before the lookup")
    p, by_frequency = a["padding_idx"], a["scale_grad_by_freq"]
    if p is None and not by_frequency:
        return _tracing.NOT_HANDLED
    indices, weight = a["input"], a["weight"]
    out = F.embedding(indices, weight)
    if not (weight.requires_grad and torch.is_grad_enabled()):
        return out  # no gradient to shape: the plain lookup
    if p is not None:
        out = _padding_row_stopped(out, indices, weight, p)
    if by_frequency:
        out = _gradient_over_frequency(out, indices, weight)
    return out
