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
  or transpose, written over all of the base;
- unfold and as_strided: by positions, each element of the view at the base's element it
  shows (`_by_positions`).

An assignment through an index with new axes (None) is written without them (`set_item`).
"""

from . import _tracing
from ._errors import export_error
from ._unexportable_ops import _untraced


def set_item(tensor, index, value):
    """tensor[index] = value by torch's own assignment (not the one _view_writes.py patches in
    while exporting), an index with new axes written without them."""
    import torch

    if any(i is None for i in _items(index)):
        index, value = _without_new_axes(tensor, index, value)
    torch._C._TensorBase.__setitem__(tensor, index, value)


def _items(index):
    return index if type(index) is tuple else (index,)


def _without_new_axes(tensor, index, value):
    """(index, value) of an assignment through an index with new axes (None) without them:
    torch 1.13's trace drops such an assignment (`h[None, :, 1:3] = v`, and the write-back of
    `h[:, None] *= s`), silently. The value spread over the view it writes, whose new axes have
    size 1, keeps the order of its elements without them (for slices, integers and Ellipsis;
    with tensor indices as well, the new axes can move the indexed ones)."""
    import torch

    if not all(i is None or i is Ellipsis or type(i) in (int, slice) for i in _items(index)):
        raise export_error(
            "an assignment through an index with both a new axis (None) and a tensor, list or "
            "bool index: torch 1.13's export drops it; index without None and unsqueeze the "
            "value instead")
    kept = tuple(i for i in _items(index) if i is not None) or Ellipsis
    if not isinstance(value, torch.Tensor):
        return kept, value
    get = torch._C._TensorBase.__getitem__
    with _untraced():
        view_shape, kept_shape = get(tensor, index).shape, get(tensor, kept).shape
    return kept, value.expand(view_shape).reshape(kept_shape)


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


def _by_positions(name, view_of):
    """A writer for a view function with constant arguments (unfold, as_strided): the view
    taken of a tensor of the base's element numbers (not recorded in the trace) says which
    element of the base each of the view's shows; the value is assigned at those elements'
    coordinates (a ScatterND of constant indices)."""

    def make(base, args, kwargs):
        def write(b, v):
            import torch

            with _untraced():
                numbers = view_of(torch.arange(b.numel()).reshape(b.shape), args, kwargs)
                if numbers.unique().numel() < numbers.numel():
                    # the view's new contents would disagree where its elements overlap
                    raise export_error(
                        f"a write into a view by {name} whose elements overlap (several show "
                        "one element of its tensor), or into a view of it: ampc.export cannot "
                        "write it back (PyTorch refuses in-place calls on the view itself); "
                        "write into the tensor")
                coordinates, rest = [], numbers
                for size in reversed(b.shape):
                    coordinates.insert(0, rest % size)
                    rest = rest // size
            set_item(b, tuple(coordinates), v)

        return write

    return make


def _unfolded(numbers, args, kwargs):
    names = ("self", "dimension", "size", "step")
    return numbers.unfold(*(_argument(names, args, kwargs, n) for n in names[1:]))


def _as_strided(base, args, kwargs):
    """as_strided's writer; refused where torch's export would read other elements than
    PyTorch: it takes the sizes, strides and offset over the tensor's own elements in order,
    PyTorch over its storage, which differ for a tensor that is not contiguous, and for an
    explicit offset, for one that does not start its storage (a slice)."""
    names = ("self", "size", "stride", "storage_offset")
    offset = _argument(names, args, kwargs, "storage_offset")
    if not base.is_contiguous() or (offset is not None and base.storage_offset() != 0):
        raise export_error(
            "as_strided of a tensor that is not contiguous from the start of its storage (a "
            "transpose, or a slice given a storage offset): torch 1.13's export reads other "
            "elements than PyTorch does; take it of a copy (.clone())")

    def strided(numbers, args, kwargs):
        size, stride = (_argument(names, args, kwargs, n) for n in names[1:3])
        return numbers.as_strided(size, stride, 0 if offset is None else offset)

    return _by_positions("as_strided", strided)(base, args, kwargs)


def _whole(inverse):
    def make(base, args, kwargs):
        def write(b, v):
            set_item(b, Ellipsis, inverse(b, v, args, kwargs))

        # the value in the layout of `base` itself, for _view_writes.py's axes changed in place
        write.inverse = lambda v: inverse(base, v, args, kwargs)
        return write

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
             "permute": _whole(_permuted), "movedim": _whole(_moved), "moveaxis": _whole(_moved),
             "unfold": _by_positions("unfold", _unfolded), "as_strided": _as_strided}
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
