"""Export of a torch.nn.Module whose forward returns the loss, as models/export_models.py
exports the bundled models: torch.onnx.export in training mode, opset 17, no constant
folding, parameters as initializers named after the module's attributes."""

import inspect
import io
import warnings


def ordered_inputs(module, example_inputs):
    """The example inputs as (names, values) in the order of module.forward's parameters.

    example_inputs: a dict keyed by forward's parameter names, or a tuple/list in order
    (then named after forward's parameters)."""
    params = [
        p.name
        for p in inspect.signature(module.forward).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if isinstance(example_inputs, dict):
        unknown = [k for k in example_inputs if k not in params]
        if unknown:
            raise TypeError(
                f"example_inputs {unknown} are not parameters of {type(module).__name__}.forward "
                f"({', '.join(params)})"
            )
        names = [p for p in params if p in example_inputs]
        return names, [example_inputs[n] for n in names]
    values = list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    if len(values) > len(params):
        raise TypeError(
            f"{len(values)} example inputs for {type(module).__name__}.forward, which takes "
            f"{len(params)}"
        )
    return params[: len(values)], values


def export_module(module, example_inputs, opset=17):
    """The ONNX bytes of `module` (forward returns the scalar loss) in training mode."""
    import torch

    names, values = ordered_inputs(module, example_inputs)
    values = tuple(v if isinstance(v, torch.Tensor) else torch.as_tensor(v) for v in values)
    was_training = module.training
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # torch warns about BatchNorm's num_batches_tracked counter, which the export drops.
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
        warnings.filterwarnings("ignore", category=UserWarning, module="torch.onnx")
        module.train()
        try:
            torch.onnx.export(
                module,
                values,
                buf,
                input_names=names,
                output_names=["loss"],
                opset_version=opset,
                training=torch.onnx.TrainingMode.TRAINING,
                do_constant_folding=False,
                export_params=True,
                keep_initializers_as_inputs=False,
            )
        finally:
            module.train(was_training)
    return buf.getvalue()
