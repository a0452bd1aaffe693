"""torch.autograd.Function applications while ampc's exporter exports a module.

A Function's backward is Python code: an ONNX file cannot carry it and ampc cannot run it.
torch 1.13 exports a Function without a `symbolic` as the ops of its forward, so training
from that file would differentiate the forward instead, silently wrong for the Functions that
exist because their backward differs (a gradient reversal layer, straight-through
estimators); and the export fails (with "unordered_map::at") on torch.utils.checkpoint's
reentrant CheckpointFunction. While the export runs (`patched`):

- a Function with a `symbolic` staticmethod exports as the op it names, as torch exports it
  (ampc differentiates that op by its gradient rule);
- torch.utils.checkpoint's CheckpointFunction runs its function directly: checkpointing
  changes what is kept for the backward, not what is computed, and memory is the compiler's
  concern. As in PyTorch, when none of its tensor inputs requires grad (the reentrant form's
  known pitfall) nothing inside it gets a gradient: its results are detached;
- any other Function is refused by name, with the ways to write it that an export keeps:
  torch's pass that replaces a Function by its forward's ops
  (_jit_pass_onnx_autograd_function_process) first looks at every Function in the graph.
"""

import contextlib

from ._errors import export_error


def _refuse_python_backwards(graph):
    """Raises for the first Function of the traced `graph` that has no `symbolic`."""
    for node in graph.nodes():
        if node.kind() != "prim::PythonOp":
            continue
        cls = getattr(node.pyobj(), "__self__", None)
        if cls is None or hasattr(cls, "symbolic"):
            continue
        raise export_error(
            f"torch.autograd.Function {cls.__qualname__}: its backward is Python code, which "
            "an ONNX export cannot carry and ampc cannot run; give it a `symbolic` "
            "staticmethod that exports an ONNX op, or write the custom gradient with torch ops "
            "and .detach() (docs/training.md, \"Where gradients stop\")")


def _checkpointed(cls, run_function, _preserve_rng_state, *inputs):
    import torch

    from . import _tracing

    if torch._C._get_tracing_state() is None:
        return _checkpoint_apply(cls, run_function, _preserve_rng_state, *inputs)
    outputs = run_function(*inputs)
    if any(t.requires_grad for t in _tracing.tensors(list(inputs))):
        return outputs
    if isinstance(outputs, torch.Tensor):
        return outputs.detach()
    return type(outputs)(o.detach() if isinstance(o, torch.Tensor) else o for o in outputs)


def _checkpoint_apply(cls, *args):
    import torch

    return torch._C._FunctionBase.__dict__["apply"].__get__(None, cls)(*args)


@contextlib.contextmanager
def patched():
    """While active, an export treats Functions as above."""
    import torch
    import torch.utils.checkpoint

    checkpoint_function = torch.utils.checkpoint.CheckpointFunction
    process = torch._C._jit_pass_onnx_autograd_function_process

    def checked_process(graph):
        _refuse_python_backwards(graph)
        return process(graph)

    own_apply = checkpoint_function.__dict__.get("apply")
    torch._C._jit_pass_onnx_autograd_function_process = checked_process
    checkpoint_function.apply = classmethod(_checkpointed)
    try:
        yield
    finally:
        torch._C._jit_pass_onnx_autograd_function_process = process
        if own_apply is None:
            del checkpoint_function.apply
        else:
            checkpoint_function.apply = own_apply
