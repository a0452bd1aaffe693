"""torch.fft's transforms of a real tensor as ampc's exporter traces them (a rewrite of
_tracing.py): torch.onnx.export (torch 1.13) has no symbolic for aten::fft_* (FNet mixes its
tokens with `torch.fft.fft2(h).real`; a spectral feature is `torch.fft.rfft(x).abs()`), and
ONNX's real tensors cannot hold the complex result.

A discrete Fourier transform along one axis is a matrix product with the DFT basis: output k
is sum_j x_j exp(-+2 pi i k j / n), so the real and imaginary parts of a transform of a real
tensor are products with cos and -+sin matrices, and each further axis is a complex product of
those parts. The call itself runs too, untraced, so the user's code holds PyTorch's complex
tensor; its parts, traced, are remembered with it, and the reads ampc's plans can hold take
them: `.real`, `.imag` (and torch.real / torch.imag), `.abs()` (torch.abs: the magnitude,
gradient 0 at 0 as PyTorch's), torch.view_as_real, and indexing (`[..., :k]`, whose parts
are indexed alike; _view_writes.py's patched Tensor.__getitem__ asks `indexed`). Any other
use of the complex tensor (a product with another, an inverse transform, an angle) is refused
in one line, as is a transform of a complex tensor; otherwise the trace would hold PyTorch's
values of the example batch as a constant.

fft, ifft, rfft, fft2, ifft2, rfft2, fftn, ifftn, rfftn: with n / s (the axis cut or padded
with zeros: the basis' columns past the input's length dropped, or zero past n) and norm
("backward", "ortho", "forward", as torch scales). PyTorch's CUDA autocast computes the
transforms in fp32: the products are traced in the autocast-disabled scope
(_autocast_regions.py), which ampc's autocast pins to fp32.
"""

import weakref

from . import _autocast_regions, _tracing
from ._errors import export_error
from ._unexportable_ops import _arguments, _constant, _static, _untraced

# id(complex result) -> (weak reference to it, traced real part, traced imaginary part, the
# transform's name); for the trace being recorded.
_PARTS = {}

# name -> (inverse, one-sided last axis, axes: "one", "two" or "all")
_TRANSFORMS = {"fft": (False, False, "one"), "ifft": (True, False, "one"),
               "rfft": (False, True, "one"), "fft2": (False, False, "two"),
               "ifft2": (True, False, "two"), "rfft2": (False, True, "two"),
               "fftn": (False, False, "all"), "ifftn": (True, False, "all"),
               "rfftn": (False, True, "all")}


def _basis(n, length, bins, inverse, scale):
    """cos and sin parts of exp(-+2 pi i k j / n) for k < bins, j < length (zero for j >= n: the
    input cut to n), times scale; as lists [bins][length], the angle reduced exactly first."""
    import numpy as np

    k = np.arange(bins).reshape(-1, 1)
    j = np.arange(length).reshape(1, -1)
    angle = 2.0 * np.pi * ((k * j) % n) / n
    inside = (j < n) * scale
    sign = 1.0 if inverse else -1.0
    return (np.cos(angle) * inside).tolist(), (sign * np.sin(angle) * inside).tolist()


def _along(t, dim, matrix):
    """The product of `matrix` [bins, length] with t's axis `dim` (of that length). (Axes
    counted from the front: torch's export of movedim to -1 writes a Transpose of a negative
    axis, whose shape ONNX infers wrong; _unexportable_ops.py's rewrite of it does not reach
    a rewrite's own calls.)"""
    last = t.dim() - 1
    return (t.transpose(dim, last) @ matrix.t()).transpose(dim, last)


def _axes_and_sizes(x, a, axes):
    """The transformed axes (each >= 0) and the transform length along each."""
    if axes == "one":
        dims, sizes = [a.get("dim", -1)], [a.get("n")]
    else:
        sizes = a.get("s")
        dims = a.get("dim", (-2, -1) if axes == "two" else None)
        if dims is None:
            dims = (list(range(x.dim())) if sizes is None
                    else list(range(x.dim() - len(sizes), x.dim())))
        sizes = [None] * len(dims) if sizes is None else list(sizes)
    dims = [d % x.dim() for d in dims]
    shape = _static(x.shape)
    return dims, [shape[d] if n is None else int(n) for d, n in zip(dims, sizes)]


def _transform(name, args, kwargs):
    import math

    import torch

    inverse, one_sided, axes = _TRANSFORMS[name]
    names = ("input", "n", "dim", "norm") if axes == "one" else ("input", "s", "dim", "norm")
    a = _arguments(names, args, kwargs)
    x = a["input"]
    if x.is_complex() or id(x) in _PARTS:
        raise export_error(
            f"torch.fft.{name} of a complex tensor: ampc.export traces transforms of real "
            "tensors only (their .real, .imag, .abs() and torch.view_as_real)")
    dims, sizes = _axes_and_sizes(x, a, axes)
    norm = a.get("norm") or "backward"
    total = math.prod(sizes)
    scale = {"ortho": 1.0 / math.sqrt(total),
             "forward": 1.0 if inverse else 1.0 / total,
             "backward": 1.0 / total if inverse else 1.0}[norm]
    with _untraced():
        out = getattr(torch.fft, name)(*args, **kwargs)
    x = x.float() if not x.is_floating_point() else x
    state = torch._C._get_tracing_state()
    state.push_scope(_autocast_regions.SCOPE)
    try:
        # The one-sided axis (the last) first, from the real input; the others after, as
        # complex products (their scale folded into the first basis).
        order = dims[::-1]
        real = imag = None
        for i, d in enumerate(order):
            n = sizes[dims.index(d)]
            bins = n // 2 + 1 if one_sided and d == dims[-1] else n
            length = _static(x.shape)[d]
            cos, sin = _basis(n, length, bins, inverse, scale if i == 0 else 1.0)
            cos, sin = _constant(cos, x.dtype), _constant(sin, x.dtype)
            if real is None:
                real, imag = _along(x, d, cos), _along(x, d, sin)
            else:
                real, imag = (_along(real, d, cos) - _along(imag, d, sin),
                              _along(real, d, sin) + _along(imag, d, cos))
    finally:
        state.pop_scope()
    return _remember(out, real, imag, name)


def _remember(out, real, imag, name):
    """out (a transform's complex result, or a slice of one) kept with its traced parts."""
    key = id(out)
    _PARTS[key] = (weakref.ref(out, lambda _: _PARTS.pop(key, None)), real, imag, name)
    return out


def _parts(t):
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    entry = _PARTS.get(id(t))
    return entry if entry is not None and entry[0]() is t else None


def _magnitude(real, imag):
    """|z| with PyTorch's gradient at 0 (0, where sqrt's would be infinite)."""
    import torch

    squared = real * real + imag * imag
    positive = squared > 0
    safe = torch.where(positive, squared, torch.ones_like(squared))
    return torch.where(positive, torch.sqrt(safe), torch.zeros_like(squared))


def _reads():
    """The reads of a transform's result that take its traced parts: func -> (parts) -> value."""
    import torch

    T = torch.Tensor
    real = lambda p: p[1]  # noqa: E731
    imag = lambda p: p[2]  # noqa: E731
    magnitude = lambda p: _magnitude(p[1], p[2])  # noqa: E731
    return {torch.real: real, torch.imag: imag, torch.abs: magnitude, T.abs: magnitude,
            torch.absolute: magnitude, T.absolute: magnitude,
            torch.view_as_real: lambda p: torch.stack([p[1], p[2]], -1)}


_READS = None


def rewrite(func, args, kwargs):
    """A transform of a real tensor, a read of its result's parts, or the refusal of any other
    use of that result."""
    import torch

    global _READS
    name = getattr(func, "__name__", "")
    if name.startswith("fft_") and getattr(torch.fft, name[4:], None) is func \
            and name[4:] in _TRANSFORMS:
        return _transform(name[4:], args, kwargs)
    if not _PARTS:
        return _tracing.NOT_HANDLED
    found = [p for p in map(_parts, _tracing.tensors((args, kwargs))) if p is not None]
    if not found:
        return _tracing.NOT_HANDLED
    if name == "__get__" and not kwargs and len(args) == 1:
        descriptor = getattr(func, "__self__", None)
        if descriptor is torch.Tensor.real:
            return found[0][1]
        if descriptor is torch.Tensor.imag:
            return found[0][2]
    if _READS is None:
        _READS = _reads()
    try:
        read = _READS.get(func)
    except TypeError:  # an unhashable callable
        read = None
    if read is not None and len(args) == 1 and not kwargs:
        return read(found[0])
    what = getattr(func, "__qualname__", None) or name or repr(func)
    raise export_error(
        f"the complex result of torch.fft.{found[0][3]} used by {what}: ampc.export keeps "
        "its .real, .imag, .abs() and torch.view_as_real (ONNX's tensors are real)")


def indexed(t, index, original):
    """t[index] by `original` (Tensor.__getitem__, which _view_writes.py patches while
    exporting: the mode does not see it); for a transform's result, its parts indexed alike
    and remembered with the slice."""
    parts = _parts(t)
    if parts is None:
        return None
    with _untraced():
        out = original(t, index)
    return _remember(out, original(parts[1], index), original(parts[2], index), parts[3])


def held(t):
    """Whether t is a transform's complex result (or a slice of one)."""
    return _parts(t) is not None
