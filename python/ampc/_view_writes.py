"""Writes into a view: in-place methods on a slice, `b = w.clone(); b[n:2 * n].zero_()`
(torchvision's Swin V2 zeroes its key bias so), `v = t[:, :3]; v.mul_(s)`, `t[i].copy_(x)`;
augmented assignments, `t[:, 1:] += s` (torchvision's MViT adds its pooled shortcut so:
Python calls add_ on the slice, then assigns the result back); in-place functions,
`F.relu(t[:, :2], inplace=True)`, `torch.relu_(t[2:])`; assignments into a slice of a slice
or of another view, `t[:, 1:][0] = v`, `t.t()[1] = v`; and any of these on views made by
other functions than indexing (`t.narrow(1, 0, 2).mul_(s)`, `t.diagonal().add_(1)`,
`t.view(-1)[:5].zero_()`). torch.onnx.export (torch 1.13) turns some of them into
assignments with a pass over the trace, refuses others ("aten::zero") and, while a
TorchFunctionMode is active (ampc's export traces under one, _tracing.py), drops them: the
file then computes with the unwritten values, and its gradient reaches what PyTorch's write
cut off (Swin V2's key bias: a gradient of about 1e11 through its normalised padded keys),
silently. An assignment into a tensor that is not a view, `t[index] = value`, exports
correctly (as ScatterND).

So while ampc's exporter traces: each view is remembered with its base and how a value goes
back into that base (`patched`: a slice taken by Tensor.__getitem__, which a
TorchFunctionMode does not see, assigned back at its index; the views of _view_inverses.py's
functions, by a rewrite of _tracing.py). An in-place call on a remembered view (a rewrite:
zero_, fill_, copy_, mul_, add_, clamp_, masked_fill_, ..., torch.relu_, a function given
inplace=True) becomes an assignment of its out-of-place result into the base, and so does an
assignment into a remembered view (`patched`: Tensor.__setitem__, which the mode is not handed
for a tensor value); views of views write back up to the tensor they were taken from. The
trace holds a view's value from the moment it was taken, where PyTorch's view shares the
written storage: so a remembered view whose base's version moved since (a write through it,
through another view, or into the base itself, `v = h[:, :2]; h.mul_(2); v.sum()`, which
torch's own export gets wrong as well) is taken again from its base as it is now, wherever
it is read (every traced call's arguments, `current_arguments`, and the patched indexing).
An in-place call returns the view, as PyTorch's does. A write into an empty slice writes
nothing (torch's export of an empty assignment crashes the process).
"""

import contextlib
import warnings
import weakref

from . import _errors, _fft, _tracing, _unexportable_ops, _view_inverses

# id(view) -> (weak reference to the view, tensor it was taken from, write(base, value),
# read(base) -> the view taken again, the base's version then), for the trace being recorded.
# Keyed by id: a tensor's == is elementwise, so tensors cannot be dict keys.
_SLICES = {}
# id(view) -> weak reference, for the views current() took again in place of stale ones.
_FRESH = {}


def _remember(out, base, write, read):
    key = id(out)
    _SLICES[key] = (weakref.ref(out, lambda _: _SLICES.pop(key, None)), base, write, read,
                    base._version)


def _entry(t):
    entry = _SLICES.get(id(t))
    return entry if entry is not None and entry[0]() is t else None


def _slice_info(t):
    """(base, write) of a remembered view, else None."""
    entry = _entry(t)
    return entry[1:3] if entry is not None else None


def _assign(index):
    return lambda base, value: _view_inverses.set_item(base, index, value)


def _index(index):
    import torch

    return lambda base: torch._C._TensorBase.__getitem__(base, index)


def current(t):
    """`t`, or where t is a remembered view whose storage was written since it was taken (its
    base's version moved: a write through another view, through t itself, or into the base),
    the view taken again from its base as it is now: the trace holds t's value from before the
    write, PyTorch's t shares the written storage."""
    entry = _entry(t)
    if entry is None:
        return t
    _, base, write, read, version = entry
    base_now = current(base)
    if base_now is base and base._version == version:
        return t
    fresh = read(base_now)
    _remember(fresh, base_now, write, read)
    _FRESH[id(fresh)] = weakref.ref(fresh)
    return fresh


def current_arguments(args, kwargs):
    """args and kwargs with each remembered view (in lists and tuples too) as it is now."""
    import torch

    if not _SLICES:
        return args, kwargs

    def now(v):
        if isinstance(v, torch.Tensor):
            return current(v)
        # plain lists and tuples only (a named tuple, such as a PackedSequence, is left alone)
        if type(v) in (list, tuple) and any(isinstance(x, torch.Tensor) for x in v):
            return type(v)(now(x) for x in v)
        return v

    return tuple(now(a) for a in args), {k: now(v) for k, v in kwargs.items()}


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
    """base[index] = value for the slice `view` (or its view function's write), and up through
    the views it was taken from."""
    base, write = _slice_info(view)
    # nothing to write (torch's export of an empty index_put crashes); the shape, not numel(),
    # which the tracer records as a tensor and warns about when it is compared
    if 0 in value.shape:
        return
    write(base, value)
    if _slice_info(base) is not None:
        _write_back(base, base.clone())


def assign(target, value):
    """target.copy_(value) for a rewrite of an in-place call (index_add_, scatter_reduce_):
    a rewrite's own calls do not reach _tracing.py's mode, so its copy into a remembered view
    would be dropped as any under the mode; written back into the view's base here."""
    if _slice_info(target) is None:
        return target.copy_(value)
    _write_back(target, value.to(target.dtype).expand_as(target))
    return target


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
    """While active, slices taken while torch traces are remembered (with their base and index),
    and assignments into remembered views are written back into their bases.

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
        if torch._C._get_tracing_state() is None:
            return original(self, index)
        if _fft.held(self):  # a slice of torch.fft's complex result: its parts sliced alike
            return _fft.indexed(self, index, original)
        self = current(self)
        out = original(self, index)
        if isinstance(out, torch.Tensor) and out is not self and _is_view_of(out, self):
            _remember(out, self, _assign(index), _index(index))
        return out

    def setitem(self, index, value):
        # An assignment into a remembered view (h[:, 1:][0] = v, h.t()[1] = v): the view's new
        # contents written back as an in-place method's are. Patched here, not rewritten in
        # the TorchFunctionMode: torch 1.13 hands it an assignment of a number but not one of
        # a tensor.
        if torch._C._get_tracing_state() is None:
            _view_inverses.set_item(self, index, value)
            return
        if _fft.held(self):
            raise _errors.export_error(
                "an assignment into torch.fft's complex result: ampc.export keeps its .real, "
                ".imag, .abs() and torch.view_as_real (ONNX's tensors are real)")
        self = current(self)
        if isinstance(value, torch.Tensor):
            value = current(value)
        if _slice_info(self) is None:
            _view_inverses.set_item(self, index, value)
            return
        written = self.clone()
        _view_inverses.set_item(written, index, value)
        _write_back(self, written)

    torch.Tensor.__getitem__ = getitem
    torch.Tensor.__setitem__ = setitem
    sequence_item.value = None
    try:
        yield
    finally:
        torch.Tensor.__getitem__ = original
        del torch.Tensor.__setitem__  # inherited from torch._C._TensorBase again
        sequence_item.value = None
        _SLICES.clear()
        _FRESH.clear()


def _in_place_counterpart(func, args, kwargs):
    """The out-of-place computation of an in-place call on args[0], as a function of no
    arguments, or None: a Tensor method (add_, zero_, ...), a torch function named with a
    trailing underscore (torch.relu_, whose out-of-place form is torch.relu), or a function
    called with inplace=True (F.relu(x, inplace=True), run with inplace=False)."""
    import inspect

    import torch

    name = getattr(func, "__name__", "")
    if name.endswith("_") and not name.endswith("__"):
        if getattr(torch.Tensor, name, None) is func:
            compute = _out_of_place(name)
            return None if compute is None else lambda: compute(*args, **kwargs)
        for owner in (torch, torch._C._nn):
            if getattr(owner, name, None) is func and hasattr(owner, name[:-1]):
                return lambda: getattr(owner, name[:-1])(*args, **kwargs)
        return None
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):  # a builtin without a signature, or other arguments
        return None
    if bound.arguments.get("inplace") is not True:
        return None
    bound.arguments["inplace"] = False
    return lambda: func(*bound.args, **bound.kwargs)


def _view_taken(func, args, kwargs):
    """A view function's result (narrow, diagonal, view, transpose, ...), remembered with how
    a write into it goes back into its base (_view_inverses.py)."""
    import torch

    write = _view_inverses.writer(func, args, kwargs)
    if write is None:
        return _tracing.NOT_HANDLED
    out = func(*args, **kwargs)
    # (a view function may return its input itself: flatten of one axis)
    if isinstance(out, torch.Tensor) and out is not args[0] and _is_view_of(out, args[0]):
        _remember(out, args[0], write, lambda base: func(base, *args[1:], **kwargs))
    return out


# In-place methods that change a tensor's axes, not its values.
_AXES_IN_PLACE = ("t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_")


def _axes_changed(func, args, kwargs):
    """`view.t_()`, `view.unsqueeze_(1)`, ... on a remembered view: the view's axes change (the
    call itself, traced), not its values, and a later write into it goes back through the new
    axes first (the inverse of the out-of-place view function) and then as before."""
    import torch

    view = args[0]
    if _FRESH.get(id(view), lambda: None)() is view:
        # current() stood this view in for one the user holds, which the call would not change
        raise _errors.export_error(
            f"{func.__name__} on a view whose tensor was written since the view was taken")
    base, write = _slice_info(view)
    read = _entry(view)[3]
    view_function = getattr(torch.Tensor, func.__name__[:-1])
    undo = _view_inverses.writer(view_function, (view,) + tuple(args[1:]), kwargs).inverse

    # The call on the tensor itself, not recorded (under the mode, torch's export of an axes
    # change in place fails on "aten::copy"), and the trace's value of the tensor from then on
    # the out-of-place view's.
    changed = view_function(*args, **kwargs)
    with _unexportable_ops._untraced():
        func(*args, **kwargs)
    torch._C._set_value_trace(view, torch._C._get_value_trace(changed))
    _remember(view, base, lambda b, value: write(b, undo(value)),
              lambda b: view_function(read(b), *args[1:], **kwargs))
    return view


def rewrite(func, args, kwargs):
    """An in-place call on a remembered view becomes an assignment into its base; a view
    function's result is remembered."""
    import torch

    if not args or not isinstance(args[0], torch.Tensor):
        return _tracing.NOT_HANDLED
    view = args[0]
    if _slice_info(view) is None:
        return _view_taken(func, args, kwargs)
    if getattr(func, "__name__", "") in _AXES_IN_PLACE and getattr(
            torch.Tensor, func.__name__, None) is func:
        return _axes_changed(func, args, kwargs)
    compute = _in_place_counterpart(func, args, kwargs)
    if compute is None:
        return _view_taken(func, args, kwargs)
    _write_back(view, compute().to(view.dtype))
    # The view itself, as PyTorch's in-place calls return: read later (Python hands an
    # augmented assignment's result, `h[:, 1:] += s` calls add_ on the slice, to the assignment
    # that follows, `h[:, 1:] = <result>`), it is taken again from its written base (current);
    # its stale trace value undid the write before (MViT's residual pooling, `x[:, :, 1:, :]
    # += q[:, :, 1:, :]`, lost its shortcut so).
    return view
