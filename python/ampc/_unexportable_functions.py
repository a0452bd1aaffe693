"""torch functions torch.onnx.export (torch 1.13) has no symbolic for ("Exporting the operator
'aten::atan2' ... is not supported"), traced by ampc's exporter (a rewrite of _tracing.py) as
the same values and gradients in ops it exports; each as a function and, where torch has one,
a Tensor method:

- atan2(y, x): atan(y / x) moved to its quadrant (x = 0: sign(y) pi / 2);
- logaddexp, logaddexp2: max(a, b) + log1p(exp(-|a - b|)) (in base 2 for the second);
- xlogy / special.xlogy (0 where x is 0), special.entr (-x log x, 0 at 0, -inf below);
- logit (with eps: the input clamped first, so the gradient is 0 outside as in PyTorch);
- exp2, expm1 (without exp(x) - 1's cancellation near 0), hypot, sinc (1 at 0), rad2deg,
  deg2rad, copysign (-0 counts as negative), heaviside; trunc and frac (trunc's gradient 0,
  frac's 1: the step functions Sign and Floor, whose gradient ampc's exporter records as 0);
- einsum with a letter repeated in an operand (a diagonal, "ii->i", or a trace, "ii"): the
  diagonals taken first, the einsum without repeats after;
- trace, kron, block_diag, take_along_dim, diag_embed (of the last axis, offset 0), diag
  (a matrix's diagonal, as in contrastive losses' positive pairs, or a vector's matrix), tile,
  addcdiv, fmax / fmin (NaN ignored; a tie's gradient to the first argument, as PyTorch's),
  nn.utils.rnn.pad_sequence (padded to the longest, stacked);
- round with decimals (round(x 10^d) / 10^d, PyTorch's), nansum, nanmean, and quantile with
  a number q and linear interpolation (the sorted values around q (n - 1), blended);
- repeat_interleave by a number (torch exports it as a Loop filling a sequence where it
  cannot size the axis), as an unsqueeze, expand and reshape;
- chunk into pieces that do not divide the axis (exported by torch as a SequenceType, which
  ampc's plans do not hold) as split with PyTorch's sizes;
- tensor_split (sections or indices; MViT's pooling splits the class token off with it),
  exported by torch as a Loop that builds a sequence, as slices with PyTorch's bounds;
- F.pdist: the distances of the row pairs i < j (cdist's upper triangle, gradient 0 at a
  zero distance as PyTorch's);
- index_add / index_add_ with repeated indices (a graph network's message sum; torch refuses
  repeats): a scatter_add at the index expanded over the source;
- scatter_reduce / scatter_reduce_ with "sum" and "mean" (include_self either way): sums and
  counts by scatter_add, and the older scatter(..., reduce="add"), on which torch's symbolic
  fails; "amax" and "amin" are refused in one line (ONNX's ScatterElements has them from
  opset 18 only, torch 1.13 exports up to 17), and so are "prod" and "multiply" (no gradient
  rule for a scatter's product).

Exported by torch as another function, so written here as well:

- a // b (floor_divide): PyTorch 1.13 floors, torch's exporter writes a truncating Div, which
  differs wherever the quotient is negative and not whole (integer index arithmetic such as
  (i - k) // 2 included); here torch.div(a, b, rounding_mode="floor"), which exports right;
- F.softplus / nn.Softplus with a threshold other than 20: torch drops the threshold (PyTorch
  returns x, with gradient 1, where beta x is above it); here that Where;
- torch.where with a Python number for a branch (`torch.where(mask, x, 0.5)`, `torch.where(x >
  0, x, 0)`): torch writes a double or int64 constant beside the float branch (a double makes
  the values after it double); here a constant of the other branch's dtype, PyTorch's result
  type;
- torch.sgn / Tensor.sgn of a real tensor (no symbolic): its sign.

Refused, where torch's export computes another value than PyTorch: masked_fill with a
floating-point mask (PyTorch 1.13 fills nothing, the export fills where it is nonzero), and so
nn.MultiheadAttention with floating-point key_padding_mask and attn_mask (PyTorch ignores the
padding mask).

Where a formula divides or takes a logarithm at a place another branch covers (atan2 at x = 0,
sinc at 0, xlogy at x = 0), the unused branch reads a safe value, so that no gradient is NaN.
The values PyTorch leaves to an edge of a function's domain can differ at that edge alone:
atan2's gradient at x = 0 exactly (0 here for x, -1 / y in PyTorch), xlogy's at x = y = 0 (0
here, NaN in PyTorch).
"""

import math

from . import _tracing, _view_writes
from ._errors import export_error
from ._unexportable_ops import _arguments, _constant, _static, _untraced


def _atan2(args, kwargs):
    import torch

    a = _arguments(("input", "other"), args, kwargs)
    y, x = a["input"], a["other"]
    zero = x == 0
    base = torch.atan(y / torch.where(zero, torch.ones_like(x), x))
    half_turn = torch.where(y >= 0, torch.full_like(base, math.pi), torch.full_like(base, -math.pi))
    return torch.where(x > 0, base, torch.where(zero, torch.sign(y) * (math.pi / 2),
                                                base + half_turn))


def _log_add_exp(a, b):
    import torch

    return torch.maximum(a, b) + torch.log1p(torch.exp(-(a - b).abs()))


def _logaddexp(args, kwargs):
    a = _arguments(("input", "other"), args, kwargs)
    return _log_add_exp(a["input"], a["other"])


def _logaddexp2(args, kwargs):
    a = _arguments(("input", "other"), args, kwargs)
    ln2 = math.log(2.0)
    return _log_add_exp(a["input"] * ln2, a["other"] * ln2) / ln2


def _xlogy(args, kwargs):
    import torch

    a = _arguments(("input", "other"), args, kwargs)
    x, y = a["input"], a["other"]
    if not isinstance(x, torch.Tensor):
        x = torch.full_like(y, x)
    if not isinstance(y, torch.Tensor):
        y = torch.full_like(x, y)
    zero = x == 0
    safe = torch.where(zero, torch.ones_like(y), y)
    out = torch.where(zero, torch.zeros_like(x * safe), x * torch.log(safe))
    return torch.where(torch.isnan(y), y, out)  # NaN where y is, as PyTorch


def _entr(args, kwargs):
    import torch

    x = _arguments(("input",), args, kwargs)["input"]
    positive = x > 0
    safe = torch.where(positive, x, torch.ones_like(x))
    rest = torch.where(x == 0, torch.zeros_like(x), torch.full_like(x, -math.inf))
    return torch.where(positive, -safe * torch.log(safe), torch.where(torch.isnan(x), x, rest))


def _logit(args, kwargs):
    import torch

    a = _arguments(("input", "eps"), args, kwargs)
    x = a["input"]
    if a.get("eps") is not None:
        x = torch.clamp(x, a["eps"], 1.0 - a["eps"])
    return torch.log(x / (1 - x))


def _exp2(args, kwargs):
    import torch

    return torch.exp(_arguments(("input",), args, kwargs)["input"] * math.log(2.0))


def _sinc(args, kwargs):
    import torch

    x = _arguments(("input",), args, kwargs)["input"]
    zero = x == 0
    scaled = math.pi * torch.where(zero, torch.ones_like(x), x)
    return torch.where(zero, torch.ones_like(x), torch.sin(scaled) / scaled)


def _hypot(args, kwargs):
    import torch

    a = _arguments(("input", "other"), args, kwargs)
    return torch.sqrt(a["input"] * a["input"] + a["other"] * a["other"])


def _expm1(args, kwargs):
    """exp(x) - 1 without its cancellation near 0: (u - 1) x / log(u), u = exp(x) (x itself
    where u rounds to 1), as accurate as PyTorch's expm1 for small x."""
    import torch

    x = _arguments(("input",), args, kwargs)["input"]
    u = torch.exp(x)
    one = u == 1
    log_u = torch.where(one, torch.ones_like(u), torch.log(u))
    near = torch.where(one, x, (u - 1) * x / log_u)
    return torch.where(x.abs() < 0.5, near, u - 1)  # far from 0: no cancellation, exp's inf


def _sign_bit(x):
    """x < 0, -0 included (1 / -0 is -inf)."""
    return (x < 0) | ((x == 0) & (1 / x < 0))


def _copysign(args, kwargs):
    import torch

    a = _arguments(("input", "other"), args, kwargs)
    x, y = a["input"], a["other"]
    if not isinstance(y, torch.Tensor):
        y = torch.full_like(x, y)
    return torch.where(_sign_bit(y), -x.abs(), x.abs())


def _heaviside(args, kwargs):
    import torch

    a = _arguments(("input", "values"), args, kwargs)
    x, values = a["input"], a["values"]
    step = (x > 0).to(x.dtype)
    return torch.where(x == 0, values.to(x.dtype).expand_as(step), step)


def _diag_embed(args, kwargs):
    import numpy as np

    a = _arguments(("input", "offset", "dim1", "dim2"), args, kwargs)
    if a.get("offset", 0) != 0 or a.get("dim1", -2) != -2 or a.get("dim2", -1) != -1:
        return _tracing.NOT_HANDLED
    x = a["input"]
    n = _static(x.shape)[-1]
    return x.unsqueeze(-1) * _constant(np.eye(n).tolist(), x.dtype)


def _einsum_terms(equation):
    """(input subscripts, output subscript) of an einsum equation, the output made explicit:
    in implicit form, the letters that occur once, in alphabetical order (after the ellipsis,
    where there is one)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if not arrow:
        letters = [c for c in inputs if c.isalpha()]
        output = ("..." if "..." in inputs else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, output


def _axis_letters(term, ndim):
    """Each axis' letter in an operand's subscript, None for those the ellipsis covers."""
    head, dots, tail = term.partition("...")
    if not dots:
        return list(term)
    return list(head) + [None] * (ndim - len(head) - len(tail)) + list(tail)


def _subscript(axes):
    """An operand's subscript from its axes' letters (None: the ellipsis')."""
    dots = [k for k, c in enumerate(axes) if c is None]
    if not dots:
        return "".join(axes)
    return "".join(axes[:dots[0]]) + "..." + "".join(axes[dots[-1] + 1:])


def _einsum(args, kwargs):
    """torch.einsum with a letter repeated in an operand (`"ii->i"`, a trace `"ii"`,
    `"bii->bi"`): each repeat taken as the operand's diagonal first (torch.diagonal: the
    letter then once, last), the same einsum without repeats after; ONNX's shape inference
    gives such an Einsum no shape and ampc no gradient rule. Others are left to torch."""
    import torch

    if not args or not isinstance(args[0], str):
        return _tracing.NOT_HANDLED
    operands = list(args[1] if len(args) == 2 and isinstance(args[1], (list, tuple))
                    else args[1:])
    terms, output = _einsum_terms(args[0])
    letters = [[c for c in t if c.isalpha()] for t in terms]
    if len(terms) != len(operands) or all(len(set(ls)) == len(ls) for ls in letters):
        return _tracing.NOT_HANDLED
    new_terms = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        axes = _axis_letters(term, x.dim())
        while True:
            repeated = next((c for c in axes if c is not None and axes.count(c) > 1), None)
            if repeated is None:
                break
            first = axes.index(repeated)
            second = axes.index(repeated, first + 1)
            x = x.diagonal(0, first, second)
            axes = [c for k, c in enumerate(axes) if k not in (first, second)] + [repeated]
        operands[i] = x
        new_terms.append(_subscript(axes))
    return torch.einsum(",".join(new_terms) + "->" + output, *operands)


def _diag(args, kwargs):
    """torch.diag: a matrix's k-th diagonal (torch.diagonal, which torch exports), or a vector
    as the k-th diagonal of a square matrix (diag_embed's, padded by |k|)."""
    import torch.nn.functional as F

    a = _arguments(("input", "diagonal"), args, kwargs)
    x, k = a["input"], a.get("diagonal", 0)
    if x.dim() == 2:
        return x.diagonal(k)
    if x.dim() != 1:
        return _tracing.NOT_HANDLED  # torch's own error
    square = _diag_embed((x,), {})
    return F.pad(square, (k, 0, 0, k) if k >= 0 else (0, -k, -k, 0))


def _tile(args, kwargs):
    """Tensor.tile / torch.tile: repeat, with the repetitions padded by 1s in front to the
    tensor's rank (repeat adds leading axes itself where they are more)."""
    a = _arguments(("input", "dims"), args[:2], kwargs)
    x, dims = a["input"], (a["dims"],) + tuple(args[2:])  # x.tile(2, 1) or x.tile((2, 1))
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return x.repeat((1,) * (x.dim() - len(dims)) + dims)


def _addcdiv(args, kwargs):
    a = _arguments(("input", "tensor1", "tensor2"), args, kwargs)
    return a["input"] + a.get("value", 1) * (a["tensor1"] / a["tensor2"])


def _nan_ignoring(keeps_first):
    """fmax / fmin: the other argument where one is NaN; ties (and NaN in both) take the
    first, whose gradient PyTorch's backward gives in full."""
    def rewrite(args, kwargs):
        import torch

        a = _arguments(("input", "other"), args, kwargs)
        x, y = a["input"], a["other"]
        if not isinstance(y, torch.Tensor):
            y = torch.full_like(x, y)
        return torch.where(keeps_first(x, y) | torch.isnan(y), x, y)
    return rewrite


def _pad_sequence(args, kwargs):
    """nn.utils.rnn.pad_sequence: each sequence padded at its end to the longest (its length
    static) and stacked."""
    import torch
    import torch.nn.functional as F

    a = _arguments(("sequences", "batch_first", "padding_value"), args, kwargs)
    sequences = list(a["sequences"])
    longest = max(_static(t.shape)[0] for t in sequences)
    padded = [F.pad(t, [0, 0] * (t.dim() - 1) + [0, longest - _static(t.shape)[0]],
                    value=a.get("padding_value", 0.0)) for t in sequences]
    return torch.stack(padded, 0 if a.get("batch_first", False) else 1)


def _trunc(x):
    import torch

    return torch.sign(x) * torch.floor(x.abs())


def _trunc_call(args, kwargs):
    return _trunc(_arguments(("input",), args, kwargs)["input"])


def _frac(args, kwargs):
    x = _arguments(("input",), args, kwargs)["input"]
    return x - _trunc(x)


def _scaled(factor):
    def rewrite(args, kwargs):
        return _arguments(("input",), args, kwargs)["input"] * factor
    return rewrite


def _trace(args, kwargs):
    import numpy as np

    x = _arguments(("input",), args, kwargs)["input"]
    rows, cols = _static(x.shape)
    return (x * _constant(np.eye(rows, cols).tolist(), x.dtype)).sum()


def _kron(args, kwargs):
    a = _arguments(("input", "other"), args, kwargs)
    x, y = a["input"], a["other"]
    dims = max(x.dim(), y.dim())
    xs = [1] * (dims - x.dim()) + list(_static(x.shape))
    ys = [1] * (dims - y.dim()) + list(_static(y.shape))
    # out[i * ys + j] = x[i] y[j] along every axis: x's axes interleaved with y's
    spread = [d for pair in zip(xs, [1] * dims) for d in pair]
    ones = [d for pair in zip([1] * dims, ys) for d in pair]
    product = x.reshape(spread) * y.reshape(ones)
    return product.reshape([p * q for p, q in zip(xs, ys)])


def _block_diag(args, kwargs):
    import torch

    blocks = [t.reshape(1, -1) if t.dim() == 1 else t.reshape(1, 1) if t.dim() == 0 else t
              for t in args]
    if not blocks:
        return _tracing.NOT_HANDLED
    dtype = blocks[0].dtype
    for b in blocks[1:]:
        dtype = torch.promote_types(dtype, b.dtype)
    width = sum(_static(b.shape)[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        r, c = _static(b.shape)
        rows.append(torch.cat([torch.zeros(r, left, dtype=dtype), b.to(dtype),
                               torch.zeros(r, width - left - c, dtype=dtype)], 1))
        left += c
    return torch.cat(rows, 0)


def _take_along_dim(args, kwargs):
    import torch

    a = _arguments(("input", "indices", "dim"), args, kwargs)
    x, index, dim = a["input"], a["indices"], a.get("dim")
    if dim is None:
        return x.reshape(-1).gather(0, index.reshape(-1))
    dim %= x.dim()
    xs, ixs = list(_static(x.shape)), list(_static(index.shape))
    shape = list(torch.broadcast_shapes(tuple(xs[:dim] + [1] + xs[dim + 1:]),
                                        tuple(ixs[:dim] + [1] + ixs[dim + 1:])))
    x_shape, i_shape = list(shape), list(shape)
    x_shape[dim], i_shape[dim] = xs[dim], ixs[dim]
    return x.expand(x_shape).gather(dim, index.expand(i_shape))


def _pdist(args, kwargs):
    import numpy as np
    import torch

    from ._losses import _norm_of_last_axis

    a = _arguments(("input", "p"), args, kwargs)
    x = a["input"]
    i, j = np.triu_indices(_static(x.shape)[0], 1)
    rows = x.index_select(0, _constant(i.tolist(), torch.int64))
    others = x.index_select(0, _constant(j.tolist(), torch.int64))
    return _norm_of_last_axis(rows - others, a.get("p", 2.0), False)


def _along(index, dim, source):
    """A 1-D index as a scatter's index over `source`: each slice along `dim` at its entry."""
    shape = [1] * source.dim()
    shape[dim] = -1
    return index.reshape(shape).expand(_static(source.shape))


def _index_add_value(a):
    x, dim = a["input"], a["dim"] % a["input"].dim()
    source = a["source"] * a.get("alpha", 1)
    return x.scatter_add(dim, _along(a["index"], dim, source), source)


def _index_add(args, kwargs):
    return _index_add_value(_arguments(("input", "dim", "index", "source", "alpha"), args,
                                       kwargs))


def _index_add_(args, kwargs):
    a = _arguments(("input", "dim", "index", "source", "alpha"), args, kwargs)
    return _view_writes.assign(a["input"], _index_add_value(a))


def _scatter_reduce_value(a):
    import torch

    reduce = a["reduce"]
    if reduce not in ("sum", "mean"):
        raise export_error(_scatter_refusal(f"scatter_reduce(reduce={reduce!r})", reduce))
    x, dim, index, src = a["input"], a["dim"] % a["input"].dim(), a["index"], a["src"]
    total = torch.zeros_like(x).scatter_add(dim, index, src)
    count = torch.zeros_like(x).scatter_add(dim, index, torch.ones_like(src))
    include_self = a.get("include_self", True)
    if reduce == "sum":
        if include_self:
            return x + total
        return torch.where(count > 0, total, x)
    if include_self:
        return (x + total) / (count + 1)
    return torch.where(count > 0, total / count.clamp_min(1), x)


def _scatter_refusal(call, reduce):
    why = ("ampc has no gradient for a scatter's product (ScatterElements' reduction 'mul')"
           if reduce in ("prod", "multiply") else
           "ONNX's ScatterElements reduces by maximum or minimum only from opset 18, and torch "
           "1.13 exports up to opset 17")
    return f"{call} cannot be trained: {why}; ampc traces a scatter's sum and mean"


def _scatter_with_reduce(args, kwargs):
    """Tensor.scatter(dim, index, src, reduce=...) (the older API, which torch's symbolic
    fails on): "add" as scatter_add; "multiply" refused in one line."""
    a = _arguments(("input", "dim", "index", "src", "value", "reduce"), args, kwargs)
    reduce = a.get("reduce")
    if reduce is None:
        return _tracing.NOT_HANDLED
    src = a.get("src", a.get("value"))
    if reduce != "add" or not hasattr(src, "shape"):
        raise export_error(_scatter_refusal(f"scatter(reduce={reduce!r})", reduce))
    return a["input"].scatter_add(a["dim"], a["index"], src)


def _softplus(args, kwargs):
    """F.softplus / nn.Softplus with a threshold other than 20: x where beta x > threshold, as
    PyTorch computes it (torch's exporter drops the threshold: log(1 + exp(beta x)) / beta
    everywhere, with gradient sigmoid(beta x) where PyTorch's is 1)."""
    import torch
    import torch.nn.functional as F

    a = _arguments(("input", "beta", "threshold"), args, kwargs)
    beta, threshold = a.get("beta", 1), a.get("threshold", 20)
    if threshold == 20:
        return _tracing.NOT_HANDLED  # exp(-20) from PyTorch's: torch's own form
    x = a["input"]
    scaled = x * beta
    return torch.where(scaled > threshold, x, F.softplus(scaled) / beta)


def _where(args, kwargs):
    """torch.where with a Python number for a branch beside a float tensor: torch exports the
    number as a double (or int64) constant beside the tensor's float32 (ONNX's Where wants one
    type; a double makes the file's later values double; ampc refuses both), where PyTorch's
    result takes the tensor's dtype (two numbers, one a float: the default dtype). The number
    as a constant of that dtype."""
    import torch

    a = _arguments(("condition", "input", "other"), args, kwargs)
    x, y = a.get("input"), a.get("other")
    numbers = [type(v) in (int, float) for v in (x, y)]
    if "condition" not in a or not any(numbers):
        return _tracing.NOT_HANDLED
    tensors = [v for v in (x, y) if isinstance(v, torch.Tensor)]
    if (tensors and not tensors[0].is_floating_point()) or (
            not tensors and all(type(v) is int for v in (x, y))):
        return _tracing.NOT_HANDLED  # integers: the constants torch writes are right
    dtype = tensors[0].dtype if tensors else torch.get_default_dtype()
    x, y = (torch.tensor(v, dtype=dtype) if number else v for v, number in zip((x, y), numbers))
    return torch.where(a["condition"], x, y)


_FLOAT_MASK = (
    "PyTorch 1.13's masked_fill fills nothing where its mask is floating-point (it reads such a "
    "mask as all False), while torch's export fills where it is nonzero; give a bool mask "
    "(mask != 0, or mask == float('-inf') for an additive one)")


def _masked_fill(args, kwargs):
    """masked_fill / masked_fill_ with a floating-point mask: refused (_FLOAT_MASK), as the
    file would compute another value than PyTorch, silently."""
    import torch

    mask = _arguments(("input", "mask", "value"), args, kwargs).get("mask")
    if isinstance(mask, torch.Tensor) and mask.is_floating_point():
        raise export_error(f"masked_fill with a {mask.dtype} mask: {_FLOAT_MASK}")
    return _tracing.NOT_HANDLED


def _attention_masks(args, kwargs):
    """F.multi_head_attention_forward (nn.MultiheadAttention, nn.Transformer's layers) with a
    floating-point key_padding_mask beside a floating-point attn_mask: PyTorch merges them by
    masked_fill, which ignores the padding so (_FLOAT_MASK); refused. The call runs as torch's
    otherwise (the mode does not see the calls inside it)."""
    import inspect

    import torch.nn.functional as F

    bound = inspect.signature(F.multi_head_attention_forward).bind(*args, **kwargs).arguments
    padding, mask = bound.get("key_padding_mask"), bound.get("attn_mask")
    if padding is not None and mask is not None and padding.is_floating_point() and \
            mask.is_floating_point():
        raise export_error(
            "nn.MultiheadAttention with a floating-point key_padding_mask beside a "
            "floating-point attn_mask: PyTorch 1.13 ignores the padding mask then (it merges "
            f"them by masked_fill, and {_FLOAT_MASK})")
    return _tracing.NOT_HANDLED


def _sgn(args, kwargs):
    """torch.sgn of a real tensor: its sign (torch has no symbolic for aten::sgn)."""
    import torch

    x = _arguments(("input",), args, kwargs)["input"]
    return _tracing.NOT_HANDLED if x.is_complex() else torch.sign(x)


def _floor_divide(args, kwargs):
    """a // b: PyTorch 1.13 floors (toward -infinity), torch's exporter writes a truncating
    Div (toward 0): another value wherever the quotient is negative and not whole."""
    import torch

    a = _arguments(("input", "other"), args, kwargs)
    return torch.div(a["input"], a["other"], rounding_mode="floor")


def _floor_divide_reflected(args, kwargs):
    import torch

    a = _arguments(("input", "other"), args, kwargs)  # other // input
    other = a["other"]
    if not isinstance(other, torch.Tensor):
        other = torch.full_like(a["input"], other)
    return torch.div(other, a["input"], rounding_mode="floor")


def _scatter_reduce(args, kwargs):
    return _scatter_reduce_value(_arguments(("input", "dim", "index", "src", "reduce",
                                             "include_self"), args, kwargs))


def _scatter_reduce_(args, kwargs):
    a = _arguments(("input", "dim", "index", "src", "reduce", "include_self"), args, kwargs)
    return _view_writes.assign(a["input"], _scatter_reduce_value(a))


def _repeat_interleave(args, kwargs):
    """repeat_interleave by a number: each slice along the axis repeated, as an unsqueeze, an
    expand and a reshape of static sizes (torch exports it as a Loop that fills a sequence where
    it cannot size the axis: a grouped-query attention repeats its keys so after rotary
    embeddings' rotate_half sliced them at x.shape[-1] // 2). Repeats given as a tensor are
    left to torch."""
    a = _arguments(("input", "repeats", "dim", "output_size"), args, kwargs)
    repeats, x, dim = a.get("repeats"), a["input"], a.get("dim")
    if type(repeats) is not int:
        return _tracing.NOT_HANDLED
    if dim is None:
        x, dim = x.reshape(-1), 0
    dim %= x.dim()
    shape = _static(x.shape)
    spread = x.unsqueeze(dim + 1).expand(*shape[:dim + 1], repeats, *shape[dim + 1:])
    return spread.reshape(*shape[:dim], shape[dim] * repeats, *shape[dim + 1:])


def _chunk(args, kwargs):
    """torch.chunk as torch.split with PyTorch's chunk sizes, ceil(n / chunks) and a shorter
    last one: torch exports an uneven chunk as a SplitToSequence (a sequence, which plans do
    not hold), a split of static sizes as a Split."""
    a = _arguments(("input", "chunks", "dim"), args, kwargs)
    x, dim = a["input"], a.get("dim", 0)
    n = _static(x.shape)[dim]
    size = max(1, -(-n // int(a["chunks"])))
    count = max(1, -(-n // size))
    return x.split([size] * (count - 1) + [n - size * (count - 1)], dim)


def _tensor_split(args, kwargs):
    """torch.tensor_split as slices along the axis: torch exports it as a Loop building a
    sequence (which plans do not hold); the pieces are PyTorch's, for a number of sections
    (the first n % sections one longer) and for indices, a list or a tensor (Python slicing's
    bounds, as ATen slices them: negative from the end, clamped to the axis)."""
    import torch

    x = args[0] if args else kwargs["input"]
    split = args[1] if len(args) > 1 else next(
        kwargs[k] for k in ("indices_or_sections", "sections", "indices",
                            "tensor_indices_or_sections") if k in kwargs)
    dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
    if isinstance(split, torch.Tensor):
        with _untraced():
            split = split.tolist()
    n = _static(x.shape)[dim]
    if isinstance(split, int):
        size, longer = divmod(n, split)
        bounds = [0]
        for i in range(split):
            bounds.append(bounds[-1] + size + (1 if i < longer else 0))
        pairs = zip(bounds[:-1], bounds[1:])
    else:
        points = [int(i) for i in split]
        pairs = zip([0] + points, points + [n])
    lead = (slice(None),) * (dim % x.dim())
    return tuple(x[lead + (slice(a, b),)] for a, b in pairs)


def _round(args, kwargs):
    """round(x, decimals=d) as PyTorch computes it: round(x 10^d) / 10^d (d < 0: round(x /
    10^-d) 10^-d), half to even; torch's symbolic takes no decimals."""
    import torch

    a = _arguments(("input",), args, kwargs)
    d = int(kwargs.get("decimals", 0))
    if d == 0:
        return _tracing.NOT_HANDLED
    x = a["input"]
    if d > 0:
        return torch.round(x * 10.0 ** d) / 10.0 ** d
    return torch.round(x / 10.0 ** -d) * 10.0 ** -d


def _without_nan(x):
    import torch

    return torch.where(torch.isnan(x), torch.zeros_like(x), x)


def _nansum(args, kwargs):
    a = _arguments(("input", "dim", "keepdim", "dtype"), args, kwargs)
    x = _without_nan(a["input"])
    if a.get("dim") is None:
        return x.sum(dtype=a.get("dtype"))
    return x.sum(a["dim"], keepdim=a.get("keepdim", False), dtype=a.get("dtype"))


def _nanmean(args, kwargs):
    import torch

    a = _arguments(("input", "dim", "keepdim", "dtype"), args, kwargs)
    x = a["input"]
    kept = (~torch.isnan(x)).to(x.dtype)
    dim, keepdim = a.get("dim"), a.get("keepdim", False)
    if dim is None:
        return _without_nan(x).sum() / kept.sum()
    return _without_nan(x).sum(dim, keepdim=keepdim) / kept.sum(dim, keepdim=keepdim)


def _quantile(args, kwargs):
    """torch.quantile with linear interpolation (its default): the sorted values at
    floor(q (n - 1)) and the next, blended by the fraction."""
    import torch

    a = _arguments(("input", "q", "dim", "keepdim", "interpolation"), args, kwargs)
    if a.get("interpolation", "linear") != "linear":
        return _tracing.NOT_HANDLED
    x, q, dim = a["input"], a["q"], a.get("dim")
    if isinstance(q, torch.Tensor):
        return _tracing.NOT_HANDLED  # a tensor of fractions: left to torch
    if dim is None:
        x, dim = x.reshape(-1), 0
    dim %= x.dim()
    n = _static(x.shape)[dim]
    ordered = x.sort(dim).values
    position = float(q) * (n - 1)
    low = int(math.floor(position))
    high = min(low + 1, n - 1)
    below = ordered.select(dim, low)
    out = below + (ordered.select(dim, high) - below) * (position - low)
    return out.unsqueeze(dim) if a.get("keepdim", False) and a.get("dim") is not None else out


def _rewrites():
    import torch
    import torch.nn.functional as F

    T = torch.Tensor
    table = {
        "atan2": _atan2, "logaddexp": _logaddexp, "logaddexp2": _logaddexp2, "xlogy": _xlogy,
        "logit": _logit, "exp2": _exp2, "sinc": _sinc, "trunc": _trunc_call, "fix": _trunc_call,
        "frac": _frac, "rad2deg": _scaled(180.0 / math.pi), "deg2rad": _scaled(math.pi / 180.0),
        "trace": _trace, "kron": _kron, "take_along_dim": _take_along_dim, "hypot": _hypot,
        "expm1": _expm1, "copysign": _copysign, "heaviside": _heaviside,
        "diag_embed": _diag_embed, "chunk": _chunk, "tensor_split": _tensor_split,
        "round": _round, "nansum": _nansum, "einsum": _einsum,
        "nanmean": _nanmean, "quantile": _quantile,
        "index_add": _index_add, "scatter_reduce": _scatter_reduce, "diag": _diag,
        "tile": _tile, "addcdiv": _addcdiv, "repeat_interleave": _repeat_interleave,
        "fmax": _nan_ignoring(lambda x, y: x >= y), "fmin": _nan_ignoring(lambda x, y: x <= y),
    }
    out = {}
    for name, rewrite in table.items():
        for owner in (torch, T):
            if hasattr(owner, name):
                out[getattr(owner, name)] = rewrite
    out.update({T.__floordiv__: _floor_divide, torch.floor_divide: _floor_divide,
                T.floor_divide: _floor_divide, T.__rfloordiv__: _floor_divide_reflected,
                T.scatter: _scatter_with_reduce, torch.scatter: _scatter_with_reduce,
                F.softplus: _softplus, torch.where: _where, torch.sgn: _sgn, T.sgn: _sgn,
                torch.masked_fill: _masked_fill, T.masked_fill: _masked_fill,
                T.masked_fill_: _masked_fill,
                F.multi_head_attention_forward: _attention_masks})
    out.update({torch.special.xlogy: _xlogy, torch.special.entr: _entr,
                torch.special.logit: _logit, torch.special.exp2: _exp2,
                torch.special.sinc: _sinc, torch.special.expm1: _expm1,
                torch.block_diag: _block_diag, F.pdist: _pdist, torch.pdist: _pdist,
                T.index_add_: _index_add_,
                # nn.utils.rnn.pad_sequence calls it (the Python function is not dispatched)
                torch._C._nn.pad_sequence: _pad_sequence,
                T.scatter_reduce_: _scatter_reduce_})
    return out


# The functions above (a rewrite of _tracing.py).
rewrite = _tracing.dispatch(_rewrites)
