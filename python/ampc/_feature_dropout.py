"""Dropout variants torch.onnx.export (torch 1.13) refuses in training mode, traced by ampc's
exporter (a rewrite of _tracing.py) as uniform draws and arithmetic, which it exports:

- channel dropout, `nn.Dropout1d/2d/3d` (F.dropout1d/2d/3d): one draw per sample and channel
  (per channel for an unbatched input), the kept channels scaled by 1 / (1 - p);
- `nn.AlphaDropout` and `nn.FeatureAlphaDropout` (SELU networks): the dropped elements (or
  channels) set to SELU's negative saturation and the result scaled and shifted back to the
  input's mean and variance, with PyTorch's constants: out = x * (a m) + a alpha' (m - 1 + p),
  m the keep mask, alpha' = 1.7580993408473766 and a = 1 / sqrt((alpha'^2 p + 1)(1 - p)).

The draws are ampc's, new every step (as Dropout's and the random fills' in _random_fills.py),
from PyTorch's distributions; in evaluation mode (training=False) they export as torch does.
At p = 0 each is its input, as ATen returns it (a rate a configuration sets to 0).
"""

import inspect
import math

from . import _tracing

_SELU_SATURATION = 1.7580993408473766


def _mask_shape(x, unbatched):
    """Per sample and channel, or per channel when the input has no batch axis."""
    kept = 1 if unbatched else 2
    return tuple(x.shape[:kept]) + (1,) * (x.dim() - kept)


def _unbatched(func, x):
    """Whether F.func treats `x` as one sample, as torch 1.13's functions decide."""
    import torch.nn.functional as F

    return (func is F.dropout1d and x.dim() == 2) or (func is F.dropout3d and x.dim() == 4)


def _keep_mask(x, shape, p):
    import torch

    return (torch.rand(shape, dtype=x.dtype) < 1 - p).to(x.dtype)


def rewrite(func, args, kwargs):
    """F.dropout1d/2d/3d, F.alpha_dropout and F.feature_alpha_dropout in training mode."""
    import torch.nn.functional as F

    channel = (F.dropout1d, F.dropout2d, F.dropout3d)
    alpha = (F.alpha_dropout, F.feature_alpha_dropout)
    if func not in channel + alpha:
        return _tracing.NOT_HANDLED
    a = inspect.signature(func).bind(*args, **kwargs)
    a.apply_defaults()
    x, p, training = a.arguments["input"], a.arguments["p"], a.arguments["training"]
    if not training:
        return _tracing.NOT_HANDLED
    if p == 0:  # torch's export refuses these in training mode even at 0; ATen returns x itself
        return x
    if p == 1:
        return x * 0.0
    if func is F.alpha_dropout:
        shape = tuple(x.shape)
    else:
        shape = _mask_shape(x, _unbatched(func, x))
    m = _keep_mask(x, shape, p)
    if func in channel:
        return x * (m / (1 - p))
    scale = 1 / math.sqrt((_SELU_SATURATION**2 * p + 1) * (1 - p))
    return x * (m * scale) + (m - 1 + p) * (_SELU_SATURATION * scale)
