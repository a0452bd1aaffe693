"""Where PyTorch's autograd stops, recorded in an export.

torch.onnx.export writes `.detach()` as nothing and the ops a forward computes under
torch.no_grad() as ordinary ops, so its file cannot tell `x + (q - x).detach()` (a
straight-through estimator) from `q`, or a target computed under no_grad from one the loss
differentiates through; a backward over it would differ from PyTorch's. While ampc's exporter
traces the module:

- `aten::detach` is exported as a marker op (STOP_DOMAIN::StopGradient) instead of nothing
  (detach_marked);
- a torch function called under no_grad with an input that requires grad has its
  floating-point results detached, so they get the marker too (the tracer records the
  detach, not the grad mode), whichever rewrite computed them (`detach_under_no_grad`, the
  finishing step of _tracing.py's rewrites); `.data` is detached likewise (the tracer would
  bake it in as a constant of the export's batch): `rewrite`, one of _tracing.py's rewrites.

finish_export then writes each marker as an ONNX Identity and lists its output under
STOP_GRADIENT_KEY: the file stays standard ONNX (an Identity is what .detach() computes), and
ampc's backward does not differentiate through those values (passes/autodiff/stop_gradient.h).
"""

import contextlib

from . import _tracing

# The ONNX metadata key: one value name per line; present, even empty, in every export made
# here, which tells ampc that the places where autograd stops are known.
STOP_GRADIENT_KEY = "ampc.stop_gradient"

# The marker's domain while the file is being made; no finished export contains it. (torch
# imports it at version 1 by itself: naming it in custom_opsets would make torch warn about
# every export without a detach.)
STOP_DOMAIN = "ampc_export"


def _detached(out, inputs):
    """`out` with its floating-point tensors detached; in-place results (an input returned
    again) stay as they are."""
    import torch

    if isinstance(out, torch.Tensor):
        if not out.is_floating_point() or any(out is t for t in inputs):
            return out
        return out.detach()
    if type(out) in (tuple, list):
        return type(out)(_detached(o, inputs) for o in out)
    if isinstance(out, tuple) and hasattr(out, "n_fields"):  # torch.return_types
        return type(out)([_detached(o, inputs) for o in out])
    return out


def rewrite(func, args, kwargs):
    """`.data` detached (a rewrite of _tracing.py)."""
    import torch

    if func == torch.Tensor.data.__get__:
        # A tensor that does not require grad (a buffer) is its own data: the same tensor, so
        # that a write through it (`buf.data.copy_(v)`) is traced as the buffer's.
        return args[0].detach() if args[0].requires_grad else args[0]
    return _tracing.NOT_HANDLED


def detach_under_no_grad(func, args, kwargs, out):
    """The result `out` of a traced call (another rewrite's or the function's own) detached
    where autograd would not connect it to its inputs: under no_grad, a call with an input that
    requires grad (the finishing step of _tracing.py's rewrites)."""
    import torch

    if torch.is_grad_enabled():
        return out
    inputs = list(_tracing.tensors((args, kwargs)))
    if not any(t.requires_grad for t in inputs):
        return out
    return _detached(out, inputs)


# The element types a gradient can flow through (torch's names for them in a trace).
_FLOAT_TYPES = ("Float", "Double", "Half", "BFloat16")


def _needs_marker(x):
    """Whether a detach of `x` can stop a gradient: not for a constant (torch.tensor(n) is
    traced as a detached constant, and a marker would keep torch from folding what is computed
    from it, leaving e.g. a Sqrt of an int64 constant in the file) nor for an integer or bool
    value, which carries no gradient."""
    if x.node().kind() in ("onnx::Constant", "prim::Constant"):
        return False
    scalar = x.type().scalarType() if hasattr(x.type(), "scalarType") else None
    return scalar is None or scalar in _FLOAT_TYPES


def _detach_symbolic(g, x):
    if not _needs_marker(x):
        return x
    out = g.op(STOP_DOMAIN + "::StopGradient", x)
    # The input's type and shape, which torch's shape inference cannot know for a custom op
    # and the symbolic functions of later ops may read (a rank, a dimension).
    out.setType(x.type())
    return out


@contextlib.contextmanager
def detach_marked(opset):
    """While active, torch.onnx.export (at `opset`) writes aten::detach as the marker op."""
    import torch

    torch.onnx.register_custom_op_symbolic("aten::detach", _detach_symbolic, opset)
    try:
        yield
    finally:
        torch.onnx.unregister_custom_op_symbolic("aten::detach", opset)


def as_identities(model):
    """Rewrites the markers of the onnx ModelProto `model` as Identity nodes and drops their
    domain's import; returns the Identities' output names."""
    names = []
    for node in model.graph.node:
        if node.domain == STOP_DOMAIN and node.op_type == "StopGradient":
            node.domain = ""
            node.op_type = "Identity"
            names.extend(node.output)
    imports = [o for o in model.opset_import if o.domain != STOP_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(imports)
    return names
