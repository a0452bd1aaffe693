"""How a value written into a view of a tensor goes back into that tensor, for the view
functions other than indexing (`_view_writes.py` remembers the views these make while ampc's
exporter traces): `writer(func, args, kwargs)` returns `write(base, value)`, which
assigns `value` (the view's new contents) into `base` as an assignment the export records, or
None for a function that is not one of them.

- narrow and select: an index of the base, `base[..., start:start + length]`, `base[..., i]`;
- diagonal: the base's diagonal elements, indexed by two position vectors (the diagonal's
  axis, last in the view, moved to where indexing puts it);
- views of the whole tensor (view, view_as, reshape, flatten, unflatten, squeeze, unsqueeze,
  t, transpose, swapaxes / swapdims, permute, movedim / moveaxis, the property .T; torch
  1.13 cannot export .mT): the value brought back to the base's layout by the inverse reshape
  or transpose, written over all of the base.
"""

from . import _tracing


def set_item(tensor, index, value):
    """tensor[index] = value by torch's own assignment (not the one _view_writes.py patches in
    while exporting)."""
    import torch

    torch._C._TensorBase.__setitem__(tensor, index, value)


def _argument(names, args, kwargs, name, default=None):
    if name in kwargs:
        return kwargs[name]
    i = names.index(name)
    return args[i] if i < len(args) else default


def _narrow(base, args, kwargs):
    names = ("self", "dim", "start", "length")
    dim = _argument(names, args, kwargs, "dim") % base.dim()
    start = int(_argument(names, args, kwargs, "start")) % base.shape[dim]
    length = int(_argument(names, args, kwargs, "length"))
    index = (slice(None),) * dim + (slice(start, start + length),)
    return lambda b, v: set_item(b, index, v)


def _select(base, args, kwargs):
    names = ("self", "dim", "index")
    dim = _argument(names, args, kwargs, "dim") % base.dim()
    index = (slice(None),) * dim + (int(_argument(names, args, kwargs, "index")),)
    return lambda b, v: set_item(b, index, v)


def _diagonal(base, args, kwargs):
    import torch

    names = ("self", "offset", "dim1", "dim2")
    offset = int(_argument(names, args, kwargs, "offset", 0))
    dim1 = _argument(names, args, kwargs, "dim1", 0) % base.dim()
    dim2 = _argument(names, args, kwargs, "dim2", 1) % base.dim()

    def write(b, v):
        n = v.shape[-1]
        index = [slice(None)] * b.dim()
        index[dim1] = torch.arange(n) + max(-offset, 0)
        index[dim2] = torch.arange(n) + max(offset, 0)
        # Two index vectors put their axis where the first one stands when they are next to
        # each other, else first; the diagonal's axis is last in the view.
        at = min(dim1, dim2) if abs(dim1 - dim2) == 1 else 0
        set_item(b, tuple(index), v.movedim(-1, at))

    return write


def _whole(inverse):
    def make(base, args, kwargs):
        return lambda b, v: set_item(b, Ellipsis, inverse(b, v, args, kwargs))

    return make


def _transposed(b, v, args, kwargs):
    if len(args) < 3 and not kwargs:  # t()
        return v.t()
    names = ("self", "dim0", "dim1")
    return v.transpose(_argument(names, args, kwargs, "dim0"),
                       _argument(names, args, kwargs, "dim1"))


def _permuted(b, v, args, kwargs):
    dims = args[1:] if len(args) > 2 or (len(args) == 2 and isinstance(args[1], int)) else (
        args[1] if len(args) > 1 else kwargs["dims"])
    dims = [d % b.dim() for d in dims]
    inverse = [dims.index(i) for i in range(len(dims))]
    return v.permute(inverse)


def _moved(b, v, args, kwargs):
    names = ("self", "source", "destination")
    return v.movedim(_argument(names, args, kwargs, "destination"),
                     _argument(names, args, kwargs, "source"))


def _reshaped(b, v, args, kwargs):
    return v.reshape(b.shape)


def _all_reversed(b, v, args, kwargs):  # .T: every axis reversed, its own inverse
    return v.permute(tuple(range(v.dim() - 1, -1, -1)))


def _properties():
    """The view properties' descriptors (a read of `t.T` reaches a TorchFunctionMode as the
    descriptor's __get__, a new bound method each time) and their writers."""
    import torch

    return {torch.Tensor.T: _whole(_all_reversed)}


def _writers():
    import torch

    T = torch.Tensor
    table = {"narrow": _narrow, "select": _select, "diagonal": _diagonal,
             "t": _whole(_transposed), "transpose": _whole(_transposed),
             "swapaxes": _whole(_transposed), "swapdims": _whole(_transposed),
             "permute": _whole(_permuted), "movedim": _whole(_moved), "moveaxis": _whole(_moved)}
    for name in ("view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze",
                 "unsqueeze"):
        table[name] = _whole(_reshaped)
    out = {}
    for name, make in table.items():
        for owner in (torch, T):
            if hasattr(owner, name):
                out[getattr(owner, name)] = make
    return out


def _handlers():
    return {func: (lambda args, kwargs, make=make: make(args[0], args, kwargs))
            for func, make in _writers().items()}


_LOOKUP = _tracing.dispatch(_handlers)


_PROPERTIES = None


def writer(func, args, kwargs):
    """write(base, value) for a call of a view function on args[0] (or a read of a view
    property), or None."""
    global _PROPERTIES
    if getattr(func, "__name__", "") == "__get__":
        if _PROPERTIES is None:
            _PROPERTIES = _properties()
        make = next((m for d, m in _PROPERTIES.items() if getattr(func, "__self__", None) is d),
                    None)
        return None if make is None else make(args[0], args, kwargs)
    out = _LOOKUP(func, args, kwargs)
    return None if out is _tracing.NOT_HANDLED else out
