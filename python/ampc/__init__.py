"""ampc from Python: compile a PyTorch model's training step with ampc's mixed-precision
compiler and train it with ampc's runtime, a few lines in an existing training script.

    import ampc
    trainer = ampc.compile(model, {"x": x, "y": y}, precision="fp16", optimizer="adam", lr=1e-3)
    for x, y in batches:
        r = trainer.step(x=x, y=y)      # r.loss, r.scale, r.skipped, r.grad_norm
    trainer.copy_to(model)              # the trained weights back into the torch module

The same compiler, plan, runtime and checkpoints as the `ampc` command line: a step computes
what `ampc train` computes, and errors raise ampc.Error with the command line's message.
See docs/python.md.
"""

import json as _json
import os as _os

# As the `ampc` command line does (tools/ampc/omp_wait_policy.h): idle OpenMP threads sleep
# instead of spinning, which on a machine whose cores are busy makes steps many times faster.
# libgomp reads the variable when it is loaded, so this applies when ampc is imported before
# anything that loads OpenMP (torch does); set OMP_WAIT_POLICY yourself to choose otherwise.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from ._ampc import Error  # noqa: E402
from ._trainer import StepResult, Trainer, compile, load

Error.__module__ = "ampc"  # shown as ampc.Error in tracebacks

__all__ = ["Error", "StepResult", "Trainer", "compile", "export", "load", "inspect",
           "precision_report", "report"]


def export(model, example_inputs, path):
    """Write the ONNX model ampc.compile makes of a torch module, for `ampc compile --train` or
    `ampc train`: torch.onnx.export with each submodule in the mode it is in (call
    model.train() first; a part left in eval mode stays so), opset 17, no constant folding, the
    module's buffers as they were before the export's tracing forward, and the names of its
    buffers and requires_grad=False parameters recorded (metadata "ampc.untrained") so that the
    command line leaves them untrained as torch.optim does; the places where autograd stops
    (.detach(), torch.no_grad(), .data), which a plain torch.onnx.export loses, as Identity
    nodes listed under the metadata key "ampc.stop_gradient". example_inputs: as compile()'s."""
    from ._export import export_module

    with open(_os.fspath(path), "wb") as f:
        f.write(export_module(model, example_inputs))


def _model_path(model, example_inputs, tmp):
    if isinstance(model, (str, _os.PathLike)):
        return _os.fspath(model)
    if example_inputs is None:
        raise TypeError("a torch module needs example_inputs (one batch)")
    from ._export import export_module

    path = _os.path.join(tmp, f"{type(model).__name__}.onnx")
    with open(path, "wb") as f:
        f.write(export_module(model, example_inputs))
    return path


def _inspect(model, example_inputs, precision, report, input_shapes):
    import tempfile

    from . import _ampc

    if isinstance(input_shapes, str):
        input_shapes = [input_shapes]
    with tempfile.TemporaryDirectory(prefix="ampc-") as tmp:
        path = _model_path(model, example_inputs, tmp)
        text = _ampc.inspect_json(path, precision, report, list(input_shapes or []))
    return _json.loads(text)


def inspect(model, example_inputs=None, *, precision="fp32", input_shapes=None):
    """What `ampc inspect MODEL --format json [--precision P]` prints, as a dict: an ONNX
    model's inputs, outputs, initializers, op histogram and opsets (with precision "fp16" or
    "bf16": the model as autocast rewrites it), or a plan's kernels and memory plan.

    model: a path (.onnx or .plan) or a torch.nn.Module with example_inputs (exported as
    ampc.compile exports it)."""
    return _inspect(model, example_inputs, precision, False, input_shapes)


def precision_report(model, example_inputs=None, *, precision="fp32", input_shapes=None):
    """What `ampc inspect MODEL --precision-report --format json [--precision P]` prints, as
    a dict: every node's compute dtype and the rule that decided it, the inserted casts with
    the bytes they move, the loss-scaling subgraph. On an ONNX model give precision "fp16"
    or "bf16" for autocast's decisions; a plan reports what it was compiled with."""
    return _inspect(model, example_inputs, precision, True, input_shapes)


def report(stats):
    """What `ampc report STATS.jsonl --format json` prints, as a dict: the fp16 range report
    of gradient statistics written by `ampc train --grad-stats` (per-tensor ranges, the
    verdict on loss scaling and the static scale to use)."""
    from . import _ampc

    return _json.loads(_ampc.report_json(_os.fspath(stats)))
