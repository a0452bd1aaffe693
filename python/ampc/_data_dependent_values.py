"""Python values the forward reads out of its tensors while ampc's exporter traces it.

Tracing records tensor ops; a Python value read out of a tensor (`if mask.any():`,
`n = max(pos.sum().item(), 1)`, `lengths.tolist()`) is a constant of the trace, so the plan
would compute with the example batch's value on every batch: a focal loss normalised by this
batch's count of positives, the branch this batch took. torch only warns (TracerWarning), and
most of its warnings are about sizes (`int(x.size(0))`), which are the same on every batch of
a plan with static shapes. While ampc exports (`checked`), a conversion by code outside torch
and ampc (the user's model, torchvision) of a value computed from the inputs' or the
module's parameters' and buffers' values, rather than from their sizes alone, or from a
random draw (a LayerDrop's `if torch.rand(()) < p:`, which PyTorch draws anew each step),
raises one line naming the code, the value it read and where the value comes from. Not checked:
conversions inside torch's own functions (argument validation, such as torch.distributions'),
inside ampc's rewrites, and on an `assert` line (a check the plan leaves out, as torch.jit
does). A checked conversion of a size or a constant is done without torch's TracerWarning.
"""

import linecache
import os
import sys
import warnings

from . import _tracing
from ._errors import export_error

# Nodes whose result depends on their first input's size only: the walk does not go into it
# (sizes are constants of a plan).
_SIZE_ONLY = {"aten::size", "aten::dim", "aten::numel", "aten::len", "prim::shape"}
# (The random *_like fills are _RANDOM's: a draw, whatever their input's size.)
_SIZE_OF_FIRST = {
    "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like",
    "aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full",
}
_SIZE_OF_SECOND = {"aten::expand_as", "aten::view_as", "aten::reshape_as", "aten::type_as"}
# Random draws: a value computed from one is drawn anew each step in PyTorch (a LayerDrop's
# `if torch.rand(()) < p:`), where the trace would keep this draw's.
_RANDOM = {
    "aten::rand", "aten::randn", "aten::randint", "aten::rand_like", "aten::randn_like",
    "aten::randint_like", "aten::randperm", "aten::bernoulli", "aten::bernoulli_",
    "aten::uniform_", "aten::normal", "aten::normal_", "aten::exponential_",
    "aten::multinomial", "aten::poisson", "aten::random_",
}
_RANDOM_DRAW = "a random draw"

_CONVERSIONS = {
    "__bool__": "a Python bool",
    "item": "a Python number (`.item()`)",
    "__int__": "a Python int",
    "__float__": "a Python float",
    "__index__": "a Python index",
    "tolist": "a Python list (`.tolist()`)",
    "numpy": "a numpy array",
}

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _data_sources(value, param_names):
    """The names of the graph inputs (model inputs, parameters, buffers) whose values, not
    only their sizes, the traced `value` is computed from, and _RANDOM_DRAW for a random
    draw it is computed from; [] for sizes and constants."""
    sources, seen, stack = [], set(), [value]
    while stack:
        v = stack.pop()
        if v.unique() in seen:
            continue
        seen.add(v.unique())
        node = v.node()
        kind = node.kind()
        if kind in _RANDOM:
            sources.append(_RANDOM_DRAW)
            continue
        if kind == "prim::Param":
            index = v.offset()
            sources.append(param_names[index] if index < len(param_names) else v.debugName())
            continue
        if kind in _SIZE_ONLY:
            continue
        inputs = list(node.inputs())
        if kind in _SIZE_OF_FIRST:
            inputs = inputs[1:]
        elif kind in _SIZE_OF_SECOND:
            inputs = inputs[:1]
        stack.extend(inputs)
    return sources


def _torch_dir():
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__))


def _converting_frame():
    """The frame of the code that asked for the conversion: the first one below this
    module's and the tracing mode's, torch's dispatch of the tensor method and Tensor's own
    Python methods (`__format__`, `__array__`)."""
    torch_dir = _torch_dir()
    plumbing = {
        os.path.join(_PACKAGE_DIR, "_data_dependent_values.py"),
        os.path.join(_PACKAGE_DIR, "_tracing.py"),
        os.path.join(torch_dir, "overrides.py"),
        os.path.join(torch_dir, "_tensor.py"),
    }
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename) in plumbing:
        frame = frame.f_back
    return frame


def _is_checked(frame):
    """Whether a conversion asked for by `frame` is the user's to fix: not torch's own code,
    not ampc's rewrites, not an assert."""
    if frame is None:
        return False
    path = os.path.abspath(frame.f_code.co_filename)
    if path.startswith(_torch_dir() + os.sep) or path.startswith(_PACKAGE_DIR + os.sep):
        return False
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return not line.startswith("assert ")


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _origin(sources, input_names):
    """'input 'x', 'fc.weight'': where a value comes from, the first two of each kind."""
    inputs = list(dict.fromkeys(s for s in sources if s in input_names))
    state = list(dict.fromkeys(s for s in sources if s not in [*input_names, _RANDOM_DRAW]))
    named = [("inputs " if len(inputs) > 1 else "input ") + ", ".join(
        f"'{n}'" for n in inputs[:2])] if inputs else []
    named += [", ".join(f"'{n}'" for n in state[:2])] if state else []
    named += [_RANDOM_DRAW] if _RANDOM_DRAW in sources else []
    more = len(inputs[2:]) + len(state[2:])
    return ", ".join(named) + (f" and {more} more" if more else "")


def checked(module, input_names):
    """A rewrite for _tracing.rewriting that raises for a data-dependent conversion (module
    docstring) and otherwise leaves the call to torch."""
    import torch

    param_names = list(input_names) + list(
        torch.jit._unique_state_dict(module, keep_vars=True).keys())
    conversions = {getattr(torch.Tensor, name): name for name in _CONVERSIONS}

    def rewrite(func, args, kwargs):
        try:
            name = conversions.get(func)
        except TypeError:  # an unhashable callable
            return _tracing.NOT_HANDLED
        if name is None or not args or not isinstance(args[0], torch.Tensor):
            return _tracing.NOT_HANDLED
        frame = _converting_frame()
        if not _is_checked(frame):
            return _tracing.NOT_HANDLED
        sources = _data_sources(torch._C._get_value_trace(args[0]), param_names)
        # torch's warning that the trace may not generalise: for a size or a constant (the
        # same on every step) not the user's concern, and the error below says more.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            value = func(*args, **kwargs)
        if not sources:
            return value
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        raise export_error(
            f"the forward reads a tensor computed from {_origin(sources, input_names)} as "
            f"{_CONVERSIONS[name]} at {where}: `{code}`, which an export records as a "
            f"constant ({_shown(value)} here), so the plan would use it on every step; "
            "compute it with tensor ops (torch.where, clamp, masks) or skip that code "
            "while exporting (`if not torch.onnx.is_in_onnx_export():`)")

    return rewrite
