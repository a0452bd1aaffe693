"""torch.nn operations torch.onnx.export (torch 1.13) cannot export, traced by ampc's exporter
(a rewrite of _tracing.py) as the same computation in ops it exports:

- convolutions with `padding="same"` or `"valid"` (aten::_convolution_mode): explicit
  padding, the odd unit of a "same" total on the right (before the input when it is even on
  both sides, through F.pad otherwise), as PyTorch pads;
- `nn.Bilinear` / F.bilinear: x1 W x2 as a MatMul with W's [in1, out x in2] view, times x2
  and summed over in2, plus the bias;
- `nn.Threshold` / F.threshold with a threshold other than 0: a Where;
- `nn.Unflatten` / Tensor.unflatten: a Reshape;
- adaptive average and max pooling to sizes that do not divide the input's: PyTorch's bins,
  start floor(i in / out) and end ceil((i + 1) in / out) along each axis; average pooling as
  a MatMul with each axis's averaging matrix, max pooling as each bin's first maximum
  (ArgMax, then a gather, so the gradient goes to that element alone as in PyTorch), the last
  axis first, which finds the first maximum in PyTorch's row-major scan;
- F.interpolate in "area" mode (adaptive average pooling to the output size), in
  "nearest-exact" mode (each output position reads input floor((i + 0.5) s), s the input /
  output ratio or 1 / scale_factor as PyTorch takes it, through a Gather per axis) and
  antialiased bilinear / bicubic (torchvision's resizes; separable, as PyTorch computes it:
  one MatMul per axis with that axis's weights, which PyTorch's own kernel computes on the
  unit vectors once, while tracing, as a constant);
- torch.nn.utils.weight_norm's weight (aten::_weight_norm): v g / ||v||, the norm over every
  axis but `dim` (over all of v for dim=None);
- torch.diff: differences of neighbouring slices (after prepend / append), n times;
- torch.logcumsumexp: log(cumsum(exp(x - m))) + m, m the axis's maximum (a constant of the
  gradient, which does not depend on it);
- torch.cumprod: the running product, one Mul per position (axes up to 512 long);
- torch.median and torch.kthvalue along an axis (or median of all): the sorted values' element
  (PyTorch's lower median), with its index;
- torch.cummax / torch.cummin (axes up to 1024 long): each prefix's extreme by pairwise
  comparison (the latest among equals, a NaN first, as PyTorch), the values gathered at its
  index, so the gradient goes to that element alone;
- torch.norm / Tensor.norm with p other than 1, 2 and the matrix norms' names (torch exports
  only those): torch.linalg.vector_norm with that order, which torch exports for any
  (adversarial training's L-infinity norms, p = 3).
"""

import contextlib
import warnings

from . import _tracing


def _static(dims):
    """`dims` (a shape, or part of one) as Python ints. While torch traces, a tensor's sizes are
    0-dim tensors whose arithmetic is traced and exported (its floor division as ONNX's
    truncating Div); ampc's plans have static shapes, so the numbers are what is meant."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return tuple(int(d) for d in dims)


def _constant(values, dtype):
    """torch.tensor(values) as one constant of the trace (torch warns about exactly that)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return torch.tensor(values, dtype=dtype)


@contextlib.contextmanager
def _untraced():
    """torch calls that compute a constant of the trace without being recorded in it."""
    import torch

    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        yield
    finally:
        torch._C._set_tracing_state(state)


def _arguments(names, args, kwargs):
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


def _tuple(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _conv_with_string_padding(func, args, kwargs):
    import torch.nn.functional as F

    a = _arguments(("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
                   args, kwargs)
    padding = a.get("padding", 0)
    x, w = a["input"], a["weight"]
    n = w.dim() - 2
    dilation = _tuple(a.get("dilation", 1), n)
    kernel = _static(w.shape[2:])
    totals = [0] * n if padding == "valid" else [d * (k - 1) for d, k in zip(dilation, kernel)]
    left = [t // 2 for t in totals]
    extra = [t % 2 for t in totals]  # the odd unit, padded after the input
    if any(extra):
        pads = []
        for e in reversed(extra):  # F.pad's order: the last axis first
            pads += [0, e]
        x = F.pad(x, pads)
    return func(x, w, a.get("bias"), a.get("stride", 1), tuple(left), dilation, a.get("groups", 1))


def _bilinear(args, kwargs):
    import torch

    a = _arguments(("input1", "input2", "weight", "bias"), args, kwargs)
    x1, x2, w, bias = a["input1"], a["input2"], a["weight"], a.get("bias")
    out_features, in1, in2 = _static(w.shape)
    lead = _static(x1.shape[:-1])
    t = torch.matmul(x1.reshape(-1, in1), w.permute(1, 0, 2).reshape(in1, out_features * in2))
    y = (t.reshape(-1, out_features, in2) * x2.reshape(-1, 1, in2)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_features)


def _threshold(args, kwargs):
    import torch

    a = _arguments(("input", "threshold", "value", "inplace"), args, kwargs)
    x = a["input"]
    return torch.where(x > a["threshold"], x, torch.full_like(x, a["value"]))


def _unflatten(args, kwargs):
    a = _arguments(("self", "dim", "sizes"), args, kwargs)
    x, sizes = a["self"], a["sizes"]
    if not all(isinstance(s, int) for s in sizes):
        return _tracing.NOT_HANDLED  # named dimensions
    dim = a["dim"] % x.dim()
    shape = _static(x.shape)
    return x.reshape(*shape[:dim], *sizes, *shape[dim + 1:])


def _bins(size, out):
    """PyTorch's adaptive pooling bins of an axis of `size` pooled to `out`."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _pooled_sizes(x, output_size, dims):
    sizes = _tuple(output_size, dims)
    shape = _static(x.shape)
    return [shape[x.dim() - dims + k] if s is None else s for k, s in enumerate(sizes)]


def _adaptive_average(x, sizes):
    import torch

    dims = len(sizes)
    for k, out in enumerate(sizes):
        axis = x.dim() - dims + k
        size = _static(x.shape)[axis]
        # Built as numbers, so that the trace holds one constant (not a fill of one).
        rows = [[0.0] * out for _ in range(size)]
        for i, (start, end) in enumerate(_bins(size, out)):
            for j in range(start, end):
                rows[j][i] = 1.0 / (end - start)
        # A positive destination: torch writes movedim(a, -1)'s perm with the -1 as given.
        last = x.dim() - 1
        x = torch.matmul(x.movedim(axis, last), _constant(rows, x.dtype)).movedim(last, axis)
    return x


def _adaptive_max(x, sizes):
    import torch

    dims = len(sizes)
    for k in reversed(range(dims)):
        axis = x.dim() - dims + k
        pieces = []
        for start, end in _bins(_static(x.shape)[axis], sizes[k]):
            window = x.narrow(axis, start, end - start)
            pieces.append(window.gather(axis, window.argmax(axis, keepdim=True)))
        x = torch.cat(pieces, axis)
    return x


def _adaptive_pool(func, args, kwargs, dims, average):
    a = _arguments(("input", "output_size", "return_indices"), args, kwargs)
    x = a["input"]
    if a.get("return_indices"):
        return _tracing.NOT_HANDLED
    sizes = _pooled_sizes(x, a["output_size"], dims)
    spatial = _static(x.shape)[x.dim() - dims:]
    if all(s % o == 0 for s, o in zip(spatial, sizes)):
        return _tracing.NOT_HANDLED  # torch exports it as a pooling with a fixed window
    return _adaptive_average(x, sizes) if average else _adaptive_max(x, sizes)


def _diff(args, kwargs):
    import torch

    a = _arguments(("input", "n", "dim", "prepend", "append"), args, kwargs)
    x, dim = a["input"], a.get("dim", -1)
    parts = [p for p in (a.get("prepend"), x, a.get("append")) if p is not None]
    if len(parts) > 1:
        x = torch.cat(parts, dim)
    for _ in range(a.get("n", 1)):
        length = _static(x.shape)[dim]
        x = x.narrow(dim, 1, length - 1) - x.narrow(dim, 0, length - 1)
    return x


def _logcumsumexp(args, kwargs):
    import torch

    a = _arguments(("input", "dim"), args, kwargs)
    x, dim = a["input"], a["dim"]
    # Clipped so that an axis of infinities gives PyTorch's infinities, not inf - inf.
    m = x.detach().amax(dim, keepdim=True).clamp(-3.0e38, 3.0e38)
    return torch.log(torch.cumsum(torch.exp(x - m), dim)) + m


def _cumprod(args, kwargs):
    import torch

    a = _arguments(("input", "dim"), args, kwargs)
    x, dim = a["input"], a["dim"]
    if a.get("dtype") is not None:
        x = x.to(a["dtype"])
    length = _static(x.shape)[dim]
    if length > 512:
        return _tracing.NOT_HANDLED
    running = [x.narrow(dim, 0, 1)]
    for i in range(1, length):
        running.append(running[-1] * x.narrow(dim, i, 1))
    return torch.cat(running, dim)


def _running_extreme(largest):
    """torch.cummax (largest) / torch.cummin along an axis up to 1024 long, as PyTorch computes
    them: for each position i, of the elements j <= i the extreme, the latest among equals, and a
    NaN before all (the latest NaN); the values gathered at those indices, so the gradient goes
    to the chosen element only. Pairs (i, j) compared at once: a [..., L, L] mask."""

    def rewrite(args, kwargs):
        import torch

        a = _arguments(("input", "dim"), args, kwargs)
        x = a["input"]
        dim = a["dim"] % max(x.dim(), 1)
        length = _static(x.shape)[dim] if x.dim() else 1
        if x.dim() == 0 or length > 1024 or not x.is_floating_point():
            return _tracing.NOT_HANDLED
        last = x.dim() - 1
        xt = x.transpose(dim, last)  # axes counted from the front (a negative perm misexports)
        rows = xt.unsqueeze(-2)  # [..., 1, L]: element j of each prefix
        with _untraced():
            before = torch.ones(length, length, dtype=torch.bool).tril()  # j <= i
            positions = torch.arange(length, dtype=x.dtype)
        nan = torch.isnan(rows) & before
        edge = float("-inf") if largest else float("inf")
        valid = before & ~torch.isnan(rows)
        filled = torch.where(valid, rows, torch.full_like(rows, edge))
        best = filled.amax(-1, keepdim=True) if largest else filled.amin(-1, keepdim=True)
        chosen = torch.where(nan.any(-1, keepdim=True), nan, (filled == best) & valid)
        index = torch.where(chosen, positions, torch.full_like(positions, -1.0)).amax(-1).long()
        values = xt.gather(-1, index)
        result = torch.return_types.cummax if largest else torch.return_types.cummin
        return result((values.transpose(dim, last), index.transpose(dim, last)))

    return rewrite


def _sorted_pick(x, dim, position, keepdim, result_type):
    values, indices = x.sort(dim)
    v, i = values.narrow(dim, position, 1), indices.narrow(dim, position, 1)
    if not keepdim:
        v, i = v.squeeze(dim), i.squeeze(dim)
    return result_type((v, i))


def _median(args, kwargs):
    import torch

    a = _arguments(("input", "dim", "keepdim"), args, kwargs)
    x = a["input"]
    if a.get("dim") is None:
        flat = x.reshape(-1)
        return flat.sort().values[(_static(flat.shape)[0] - 1) // 2]
    dim = a["dim"]
    return _sorted_pick(x, dim, (_static(x.shape)[dim] - 1) // 2, a.get("keepdim", False),
                        torch.return_types.median)


def _kthvalue(args, kwargs):
    import torch

    a = _arguments(("input", "k", "dim", "keepdim"), args, kwargs)
    return _sorted_pick(a["input"], a.get("dim", -1), a["k"] - 1, a.get("keepdim", False),
                        torch.return_types.kthvalue)


def _interpolate(args, kwargs):
    """F.interpolate in the modes torch cannot export; NOT_HANDLED for the others."""
    import math

    import torch

    a = _arguments(("input", "size", "scale_factor", "mode", "align_corners",
                    "recompute_scale_factor", "antialias"), args, kwargs)
    mode = a.get("mode", "nearest")
    if a.get("antialias") and mode in ("bilinear", "bicubic"):
        return _antialiased(a)
    if mode not in ("area", "nearest-exact") or a.get("antialias"):
        return _tracing.NOT_HANDLED
    x = a["input"]
    dims = x.dim() - 2
    spatial = _static(x.shape)[2:]
    factors = None  # PyTorch maps by the sizes unless a scale factor is given and kept
    if a.get("size") is not None:
        sizes = list(_tuple(a["size"], dims))
    else:
        factors = list(_tuple(a["scale_factor"], dims))
        sizes = [int(math.floor(n * f)) for n, f in zip(spatial, factors)]
        if a.get("recompute_scale_factor"):
            factors = None
    if mode == "area":
        return _adaptive_average(x, sizes)
    for k in range(dims):
        n, out = spatial[k], sizes[k]
        step = n / out if factors is None else 1.0 / factors[k]
        index = [min(int(math.floor((i + 0.5) * step)), n - 1) for i in range(out)]
        x = x.index_select(2 + k, _constant(index, torch.int64))
    return x


def _axis_weights(a, n, axis):
    """The [out, n] weights of an antialiased interpolation along spatial `axis` (n long):
    PyTorch's kernel on the unit vectors, the other axis of length 1 left as it is."""
    import torch
    import torch.nn.functional as F

    size = scale = None
    if a.get("size") is not None:
        size = [1, 1]
        size[axis] = _tuple(a["size"], 2)[axis]
    else:
        scale = [1.0, 1.0]
        scale[axis] = float(_tuple(a["scale_factor"], 2)[axis])
    shape = [1, n, 1, 1]
    shape[2 + axis] = n
    with _untraced(), torch.no_grad():
        units = torch.eye(n, dtype=torch.float64).reshape(shape)
        out = F.interpolate(units, size=size, scale_factor=scale, mode=a["mode"],
                            align_corners=a.get("align_corners"),
                            recompute_scale_factor=a.get("recompute_scale_factor"),
                            antialias=True)
        return out.reshape(n, -1).t().tolist()


def _antialiased(a):
    """Antialiased bilinear / bicubic interpolation of [N, C, H, W] as W_h x W_w^T."""
    import torch

    x = a["input"]
    if x.dim() != 4:
        return _tracing.NOT_HANDLED  # PyTorch antialiases 4-D inputs only, and says so
    h, w = _static(x.shape)[2:]
    rows = _constant(_axis_weights(a, h, 0), x.dtype)
    cols = _constant(_axis_weights(a, w, 1), x.dtype)
    return torch.matmul(torch.matmul(rows, x), cols.t())


def _weight_norm(args, kwargs):
    a = _arguments(("v", "g", "dim"), args, kwargs)
    v, g, dim = a["v"], a["g"], a.get("dim", 0)
    if dim == -1:
        return v * (g / v.pow(2).sum().sqrt())
    kept = dim % v.dim()
    axes = [d for d in range(v.dim()) if d != kept]
    return v * (g / v.pow(2).sum(axes, keepdim=True).sqrt())


def _norm(func, args, kwargs):
    """torch.norm and Tensor.norm as a vector norm, for the orders torch cannot export."""
    import torch

    names = ("input", "p", "dim", "keepdim", "out", "dtype") if func is torch.norm else (
        "input", "p", "dim", "keepdim", "dtype")
    a = _arguments(names, args, kwargs)
    p = a.get("p", "fro")
    if p is None or isinstance(p, str) or float(p) in (1.0, 2.0) or a.get("out") is not None:
        return _tracing.NOT_HANDLED
    return torch.linalg.vector_norm(a["input"], ord=p, dim=a.get("dim"),
                                    keepdim=a.get("keepdim", False), dtype=a.get("dtype"))


# Functions and methods of the same name (torch.diff and Tensor.diff) rewritten alike.
_BY_NAME = {"diff": _diff, "logcumsumexp": _logcumsumexp, "cumprod": _cumprod,
            "median": _median, "kthvalue": _kthvalue, "cummax": _running_extreme(True),
            "cummin": _running_extreme(False)}


def rewrite(func, args, kwargs):
    """The operations above, where torch cannot export them."""
    import torch
    import torch.nn.functional as F

    if func in (torch.conv1d, torch.conv2d, torch.conv3d):
        padding = args[4] if len(args) > 4 else kwargs.get("padding", 0)
        if isinstance(padding, str):
            return _conv_with_string_padding(func, args, kwargs)
        return _tracing.NOT_HANDLED
    if func is torch._weight_norm:
        return _weight_norm(args, kwargs)
    if func is torch.norm or func is torch.Tensor.norm:
        return _norm(func, args, kwargs)
    if func is F.interpolate:
        return _interpolate(args, kwargs)
    if func is torch.bilinear:
        return _bilinear(args, kwargs)
    if func is F._threshold:
        return _threshold(args, kwargs)
    if func is torch.Tensor.unflatten:
        return _unflatten(args, kwargs)
    name = getattr(func, "__name__", "")
    if name in _BY_NAME and (func is getattr(torch, name) or func is getattr(torch.Tensor, name)):
        return _BY_NAME[name](args, kwargs)
    for dims in (1, 2, 3):
        if func is getattr(F, f"adaptive_avg_pool{dims}d"):
            return _adaptive_pool(func, args, kwargs, dims, average=True)
        if func is getattr(F, f"adaptive_max_pool{dims}d"):
            return _adaptive_pool(func, args, kwargs, dims, average=False)
    return _tracing.NOT_HANDLED
