"""The rewrites ampc's exporter applies while torch traces a module: a TorchFunctionMode that,
only while a trace is being recorded, offers each torch function call to the rewrites in
turn (_stop_gradient.py's, _embedding.py's, _feature_dropout.py's, _recurrent_dropout.py's,
_unexportable_ops.py's, _unexportable_layers.py's, _losses.py's, _view_writes.py's).
A rewrite returns the call's result, computed its own way so that the trace records what a
plain torch.onnx.export loses or cannot export, or NOT_HANDLED. Outside a trace, and for calls no rewrite takes, the function runs as
it is. The calls made inside the mode's handler do not reach it (torch suspends the mode
there): neither a rewrite's own calls nor those inside torch's Python functions, which the
mode sees as one call (F.normalize under no_grad is detached as a whole)."""

import contextlib

NOT_HANDLED = object()


def tensors(obj):
    """The tensors in `obj`, a tensor or nested lists, tuples and dicts of them."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensors(item)


@contextlib.contextmanager
def rewriting(rewrites, finish=None, arguments=None):
    """While active, a traced call func(*args, **kwargs) is the first result of
    rewrite(func, args, kwargs) for the `rewrites` that is not NOT_HANDLED (the call itself
    when none takes it), passed through finish(func, args, kwargs, result) if given (under
    no_grad, a rewrite's result is detached as the call's own would be). Given `arguments`,
    the call's arguments are arguments(args, kwargs) (views written since they were taken, as
    they are now: _view_writes.py)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Rewriting(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if torch._C._get_tracing_state() is None:
                return func(*args, **kwargs)
            if arguments is not None:
                args, kwargs = arguments(args, kwargs)
            for rewrite in rewrites:
                out = rewrite(func, args, kwargs)
                if out is not NOT_HANDLED:
                    break
            else:
                out = func(*args, **kwargs)
            return out if finish is None else finish(func, args, kwargs, out)

    with Rewriting():
        yield


def dispatch(table):
    """A rewrite that hands a call to the handler table()[func] (the table built on the first
    call, when torch is loaded), handler(args, kwargs); NOT_HANDLED for other functions."""
    handlers = None

    def rewrite(func, args, kwargs):
        nonlocal handlers
        if handlers is None:
            handlers = table()
        try:
            handler = handlers.get(func)
        except TypeError:  # an unhashable callable
            return NOT_HANDLED
        return NOT_HANDLED if handler is None else handler(args, kwargs)

    return rewrite
