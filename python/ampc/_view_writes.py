"""In-place writes into a slice: `b = w.clone(); b[n:2 * n].zero_()` (torchvision's Swin V2
zeroes its key bias so), `v = t[:, :3]; v.mul_(s)`, `t[i].copy_(x)`, `t[:, 1:] += s`
(torchvision's MViT adds its pooled shortcut so: Python calls add_ on the slice, then assigns
the result back). torch.onnx.export
(torch 1.13) turns such a write into an assignment with a pass over the trace that works for
some of them, refuses others ("aten::zero") and, while a TorchFunctionMode is active (ampc's
export traces under one, _tracing.py), drops them: the file then computes with the unwritten
values, and its gradient reaches what PyTorch's write cut off (Swin V2's key bias: a
gradient of about 1e11 through its normalised padded keys), silently. An assignment,
`t[index] = value`, exports correctly (as ScatterND).

So while ampc's exporter traces: each slice taken with `t[index]` that is a view of t is
remembered with its base and index (`patched`: Tensor.__getitem__, which a TorchFunctionMode
does not see), and an in-place method called on it (a rewrite of _tracing.py: zero_, fill_,
copy_, mul_, add_, clamp_, masked_fill_, ...) becomes the assignment
`base[index] = <the method's out-of-place result>`, which writes the same values into the
same storage; nested slices write back up to the tensor they were taken from. The slice
object keeps its storage, so later reads of the base see the write, and so do reads of the
method's result (the written value, remembered as the same slice); a later read of the slice
object itself in the same forward reads the trace's value from before the write (a
limitation: read the base or the method's result instead).
"""

import contextlib
import warnings
import weakref

from . import _tracing

# id(slice) -> (weak reference to the slice, tensor it was taken from, index), for the trace
# being recorded. Keyed by id: a tensor's == is elementwise, so tensors cannot be dict keys.
_SLICES = {}


def _remember(out, base, index):
    key = id(out)
    _SLICES[key] = (weakref.ref(out, lambda _: _SLICES.pop(key, None)), base, index)


def _slice_info(t):
    """(base, index) of a remembered slice, else None."""
    entry = _SLICES.get(id(t))
    return entry[1:] if entry is not None and entry[0]() is t else None


def _is_view_of(out, base):
    root = base._base if base._base is not None else base
    return out._base is root


def _fill(t, value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(t.dtype).expand_as(t)
    return torch.full_like(t, value)


def _copy(t, src, non_blocking=False):
    return src.to(t.dtype).expand_as(t)


def _zero(t):
    import torch

    return torch.zeros_like(t)


# In-place methods without an out-of-place Tensor method of their name without "_".
_SPECIAL = {"zero_": _zero, "fill_": _fill, "copy_": _copy}


def _out_of_place(name):
    import torch

    if name in _SPECIAL:
        return _SPECIAL[name]
    return getattr(torch.Tensor, name[:-1], None)


def _write_back(view, value):
    """base[index] = value for the slice `view`, and up through the slices it was taken from."""
    base, index = _slice_info(view)
    base[index] = value
    if _slice_info(base) is not None:
        _write_back(base, base.clone())


def _sequence_item_slot(cls):
    """A ctypes view of the C slot sq_item of the heap type `cls`, or None where this
    interpreter's type layout is not the one expected (CPython: tp_as_sequence is the 14th
    pointer-sized field of a type object; sq_item the 4th of the methods it points to, which
    a heap type holds inside its own object)."""
    import ctypes

    word = ctypes.sizeof(ctypes.c_void_p)
    methods = ctypes.c_void_p.from_address(id(cls) + 13 * word).value
    if not methods or not id(cls) < methods < id(cls) + type.__sizeof__(cls):
        return None
    return ctypes.c_void_p.from_address(methods + 3 * word)


def _is_sequence(obj):
    import ctypes

    check = ctypes.pythonapi.PySequence_Check
    check.argtypes = [ctypes.py_object]
    return bool(check(obj))


@contextlib.contextmanager
def patched():
    """While active, slices taken while torch traces are remembered (with their base and index).

    Setting a Python __getitem__ on torch.Tensor also fills its type's sequence slot, for good:
    CPython then takes every tensor for a sequence, and torch.tensor([t]) of a 0-d tensor t
    fails with "len() of a 0-d tensor" (torch's own exporter calls it while converting
    nn.TransformerDecoder's sizes; a user's code after ampc.compile too). Tensor's C type
    defines only the mapping slot, so the sequence slot is emptied again while patched and
    after."""
    import torch

    original = torch.Tensor.__getitem__
    sequence_item = _sequence_item_slot(torch.Tensor)
    if sequence_item is None or sequence_item.value or _is_sequence(torch.tensor(0)):
        warnings.warn("ampc: this Python's type layout is not CPython's as expected, so "
                      "in-place writes into slices are exported as torch exports them")
        yield
        return

    def getitem(self, index):
        out = original(self, index)
        if (torch._C._get_tracing_state() is not None and isinstance(out, torch.Tensor)
                and _is_view_of(out, self)):
            _remember(out, self, index)
        return out

    torch.Tensor.__getitem__ = getitem
    sequence_item.value = None
    try:
        yield
    finally:
        torch.Tensor.__getitem__ = original
        sequence_item.value = None
        _SLICES.clear()


def rewrite(func, args, kwargs):
    """An in-place method on a remembered slice becomes an assignment into its base."""
    import torch

    name = getattr(func, "__name__", "")
    if (not name.endswith("_") or name.endswith("__") or not args
            or not isinstance(args[0], torch.Tensor) or _slice_info(args[0]) is None
            or getattr(torch.Tensor, name, None) is not func):
        return _tracing.NOT_HANDLED
    compute = _out_of_place(name)
    if compute is None:
        return _tracing.NOT_HANDLED
    view = args[0]
    value = compute(view, *args[1:], **kwargs).to(view.dtype)
    base, index = _slice_info(view)
    _write_back(view, value)
    # The written value, remembered as the same slice of the same base, is the method's result:
    # the slice object itself holds the trace's value from before the write, and Python hands
    # an augmented assignment's result (`h[:, 1:] += s` calls add_ on the slice) to the
    # assignment that follows, `h[:, 1:] = <result>`, which would undo the write with it
    # (MViT's residual pooling, `x[:, :, 1:, :] += q[:, :, 1:, :]`, lost its shortcut so).
    _remember(value, base, index)
    return value
