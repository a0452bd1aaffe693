"""torch.nn layers torch.onnx.export (torch 1.13) cannot export in training mode, traced by
ampc's exporter (a rewrite of _tracing.py) as the same computation in ops it exports:

- `nn.LayerNorm(elementwise_affine=False)` / F.layer_norm without weight or bias: torch
  writes a LayerNormalization with an empty scale, which ONNX's checker refuses; here a
  constant scale of ones (and bias of zeros);
- F.affine_grid (spatial transformers): PyTorch's base grid of normalised coordinates (x, y
  [, z], 1), ends at -1 and 1 with align_corners, at -1 + 1 / n and 1 - 1 / n without,
  times theta transposed;
- `nn.EmbeddingBag` / F.embedding_bag over a 2-D input (bags of one length, no offsets):
  the rows' sum, mean or maximum over each bag, per_sample_weights for "sum", padding_idx
  rows left out of the sum and the mean (a bag of padding only is zeros, as in PyTorch);
  over a 1-D input cut at offsets (bags of varying lengths, a recommender's multi-hot
  features; torch writes a Loop, which ampc refuses): the same through a membership matrix
  computed from the offsets, which may change each step, include_last_offset too;
- `nn.MaxUnpool1d/2d/3d` / F.max_unpool: each value scattered to the position its index
  names in a zero map of PyTorch's output size;
- F.normalize with `out=` (both spectral norms' power iterations write their u and v buffers
  that way): the normalised value, written into `out` with an in-place product and sum, a
  form torch exports (so the buffer's update is exported as well, _export.py). A spectral
  norm of a convolution is refused by name (_export.py): torch's exporter loses the types of
  the graph around the buffers' writes, and fails on "a kernel of unknown shape";
- `nn.ChannelShuffle` / F.channel_shuffle (aten::channel_shuffle): the channels as [groups,
  C / groups], transposed, as ShuffleNet's own function writes it;
- `nn.Fold` / F.fold (aten::col2im; the adjoint of unfold, which torch exports): the blocks
  summed into place by a transposed convolution, grouped by channel, whose constant kernels
  are one-hot at each block position (stride, padding and dilation as the fold's).

Refused by name: `nn.InstanceNorm1d/2d/3d(track_running_stats=True)` in training mode, which
torch writes as a BatchNormalization that ONNX's checker refuses, and whose evaluation reads
the running statistics where training reads each instance's (ampc's held-out evaluation would
not).
"""

import math
import warnings

from . import _tracing
from ._errors import export_error
from ._unexportable_ops import _arguments, _constant, _static, _tuple


def _layer_norm(args, kwargs):
    import torch
    import torch.nn.functional as F

    a = _arguments(("input", "normalized_shape", "weight", "bias", "eps"), args, kwargs)
    weight, bias = a.get("weight"), a.get("bias")
    if weight is not None and bias is not None:
        return _tracing.NOT_HANDLED
    shape = tuple(a["normalized_shape"]) if isinstance(
        a["normalized_shape"], (list, tuple, torch.Size)) else (a["normalized_shape"],)
    x = a["input"]
    if weight is None:
        weight = torch.ones(shape, dtype=x.dtype)
    if bias is None:
        bias = torch.zeros(shape, dtype=x.dtype)
    return F.layer_norm(x, shape, weight, bias, a.get("eps", 1e-5))


def _grid_axis(n, align_corners):
    """PyTorch's normalised coordinates of n positions along one axis."""
    import numpy as np

    if n <= 1:
        return np.zeros(n)
    axis = np.linspace(-1.0, 1.0, n)
    return axis if align_corners else axis * (n - 1) / n


def _affine_grid(args, kwargs):
    import numpy as np

    a = _arguments(("theta", "size", "align_corners"), args, kwargs)
    theta, size = a["theta"], _static(a["size"])
    align = bool(a.get("align_corners"))  # None is False, as PyTorch (which warns) takes it
    spatial = list(size[2:])
    if len(spatial) not in (2, 3):
        raise ValueError(f"affine_grid of a {len(size)}-D size")
    # (x, y[, z], 1) at each position, x along the last axis (numpy: constants, not traced)
    mesh = np.meshgrid(*[_grid_axis(n, align) for n in spatial], indexing="ij")
    base = np.stack(list(reversed(mesh)) + [np.ones(spatial)], -1)
    base = _constant(base.reshape(-1, len(spatial) + 1).tolist(), theta.dtype)
    grid = base.unsqueeze(0).matmul(theta.transpose(1, 2))
    return grid.reshape([size[0]] + spatial + [len(spatial)])


def _embedding_bag(args, kwargs):
    import torch.nn.functional as F

    a = _arguments(("input", "weight", "offsets", "max_norm", "norm_type",
                    "scale_grad_by_freq", "mode", "sparse", "per_sample_weights",
                    "include_last_offset", "padding_idx"), args, kwargs)
    x, weight, mode = a["input"], a["weight"], a.get("mode", "mean")
    padding = a.get("padding_idx")
    if (x.dim() not in (1, 2) or (x.dim() == 1) != (a.get("offsets") is not None)
            or a.get("max_norm") is not None or a.get("scale_grad_by_freq")
            or (mode == "max" and padding is not None)
            or (mode != "sum" and a.get("per_sample_weights") is not None)):
        return _tracing.NOT_HANDLED  # torch's own error, or ampc's refusal of its Loop
    if padding is not None and padding < 0:
        padding += weight.shape[0]
    if x.dim() == 1:
        return _bags_at_offsets(x, weight, a["offsets"], mode, padding,
                                a.get("per_sample_weights"), a.get("include_last_offset"))
    rows = F.embedding(x, weight)
    if mode == "max":
        return rows.max(1).values
    kept = None
    if padding is not None:
        kept = (x != padding).to(rows.dtype).unsqueeze(2)
        rows = rows * kept
    if a.get("per_sample_weights") is not None:
        rows = rows * a["per_sample_weights"].unsqueeze(2)
    total = rows.sum(1)
    if mode == "sum":
        return total
    if kept is None:
        return total / x.shape[1]
    return total / kept.sum(1).clamp_min(1)


def _bags_at_offsets(x, weight, offsets, mode, padding, per_sample_weights, last_included):
    """F.embedding_bag of a 1-D input cut into bags at `offsets` (a tensor: a graph input
    or computed; its values may differ each step): a membership matrix [bags, indices]
    (index i is in bag b when offsets[b] <= i < the next offset, not padding) times the
    rows for "sum" and "mean", the rows' maximum over its members for "max"; an empty bag
    is zeros, as in PyTorch."""
    import torch
    import torch.nn.functional as F

    n = _static(x.shape)[0]
    bounds = offsets if last_included else torch.cat([offsets, offsets.new_full((1,), n)])
    position = torch.arange(n).unsqueeze(0)
    member = (position >= bounds[:-1].unsqueeze(1)) & (position < bounds[1:].unsqueeze(1))
    if padding is not None:
        member = member & (x != padding).unsqueeze(0)
    rows = F.embedding(x, weight)
    if mode == "max":
        chosen = torch.where(member.unsqueeze(2), rows.unsqueeze(0),
                             torch.full_like(rows[:1], float("-inf")))
        return torch.where(member.any(1, keepdim=True), chosen.max(1).values,
                           torch.zeros_like(chosen[:, 0]))
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    share = member.to(rows.dtype)
    total = share @ rows
    if mode == "sum":
        return total
    return total / share.sum(1, keepdim=True).clamp_min(1)


def _max_unpool(args, kwargs, dims):
    import torch.nn.functional as F

    a = _arguments(("input", "indices", "kernel_size", "stride", "padding", "output_size"),
                   args, kwargs)
    x, indices = a["input"], a["indices"]
    kernel = list(_tuple(a["kernel_size"], dims))
    stride = kernel if a.get("stride") is None else list(_tuple(a["stride"], dims))
    padding = list(_tuple(a.get("padding", 0), dims))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = [int(n) for n in F._unpool_output_size(x, kernel, stride, padding,
                                                     a.get("output_size"))]
    lead = list(_static(x.shape))[:-dims]
    planes = x.reshape(lead + [-1])
    zeros = planes.new_zeros(lead + [math.prod(out)])
    scattered = zeros.scatter(len(lead), indices.reshape(lead + [-1]), planes)
    return scattered.reshape(lead + out)


def _normalize_into(args, kwargs):
    a = _arguments(("input", "p", "dim", "eps", "out"), args, kwargs)
    out = a.get("out")
    if out is None:
        return _tracing.NOT_HANDLED
    x = a["input"]
    norm = x.norm(a.get("p", 2.0), a.get("dim", 1), keepdim=True)
    value = x / norm.clamp_min(a.get("eps", 1e-12))  # F.normalize's (which expands the norm)
    # out = value, as an update torch exports (it refuses copy_ into a buffer under no_grad)
    return out.mul_(0).add_(value)


def _channel_shuffle(args, kwargs):
    a = _arguments(("input", "groups"), args, kwargs)
    x, groups = a["input"], int(a["groups"])
    shape = list(_static(x.shape))
    shuffled = x.reshape([shape[0], groups, shape[1] // groups] + shape[2:]).transpose(1, 2)
    return shuffled.reshape(shape)


def _fold(args, kwargs):
    import numpy as np
    import torch.nn.functional as F

    a = _arguments(("input", "output_size", "kernel_size", "dilation", "padding", "stride"),
                   args, kwargs)
    x = a["input"]
    unbatched = x.dim() == 2
    if unbatched:
        x = x.unsqueeze(0)
    out = _tuple(a["output_size"], 2)
    kernel, dilation = _tuple(a["kernel_size"], 2), _tuple(a.get("dilation", 1), 2)
    padding, stride = _tuple(a.get("padding", 0), 2), _tuple(a.get("stride", 1), 2)
    blocks = [(o + 2 * p - d * (k - 1) - 1) // s + 1
              for o, p, d, k, s in zip(out, padding, dilation, kernel, stride)]
    n, rows, _ = _static(x.shape)
    per_block = kernel[0] * kernel[1]
    channels = rows // per_block
    # Row c * kh * kw + i * kw + j of the unfolded input is channel c's value at (i, j).
    one_hot = np.eye(per_block).reshape(per_block, 1, kernel[0], kernel[1])
    weight = _constant(np.tile(one_hot, (channels, 1, 1, 1)).tolist(), x.dtype)
    spans = [(b - 1) * s - 2 * p + d * (k - 1) + 1
             for b, s, p, d, k in zip(blocks, stride, padding, dilation, kernel)]
    folded = F.conv_transpose2d(x.reshape(n, rows, blocks[0], blocks[1]), weight,
                                stride=stride, padding=padding,
                                output_padding=[o - sp for o, sp in zip(out, spans)],
                                groups=channels, dilation=dilation)
    return folded[0] if unbatched else folded


def _instance_norm(args, kwargs):
    a = _arguments(("input", "running_mean", "running_var", "weight", "bias", "use_input_stats",
                    "momentum", "eps"), args, kwargs)
    if a.get("running_mean") is None or not a.get("use_input_stats", True):
        return _tracing.NOT_HANDLED
    raise export_error(
        "nn.InstanceNorm with track_running_stats=True in training mode: torch 1.13 exports it "
        "as a BatchNormalization ONNX refuses, and its evaluation reads the running statistics "
        "where training reads each instance's; track_running_stats=False (the default) trains "
        "the same step")


def rewrite(func, args, kwargs):
    """The layers above, where torch cannot export them."""
    import torch
    import torch.nn.functional as F

    if func is F.layer_norm:
        return _layer_norm(args, kwargs)
    if func is F.affine_grid:
        return _affine_grid(args, kwargs)
    if func is F.embedding_bag:
        return _embedding_bag(args, kwargs)
    if func is F.normalize:
        return _normalize_into(args, kwargs)
    if func is torch.channel_shuffle or func is torch.native_channel_shuffle:
        return _channel_shuffle(args, kwargs)
    if func is F.fold:
        return _fold(args, kwargs)
    if func is F.instance_norm:
        return _instance_norm(args, kwargs)
    for dims in (1, 2, 3):
        if func is getattr(F, f"max_unpool{dims}d"):
            return _max_unpool(args, kwargs, dims)
    return _tracing.NOT_HANDLED
