"""Export of a torch.nn.Module whose forward returns the loss, as models/export_models.py
exports the bundled models: torch.onnx.export in training mode, opset 17, no constant
folding, parameters as initializers named after the module's attributes; and, unlike a plain
torch.onnx.export, the places where PyTorch's autograd stops (_stop_gradient.py, through the
rewrites applied while tracing, _tracing.py) and the in-place random fills torch cannot
export (_random_fills.py); torch.autograd.Functions as _autograd_functions.py says; circular
padding as PyTorch computes it, which torch 1.13's exporter gets wrong (_circular_pad.py);
nn.Embedding's padding_idx and scale_grad_by_freq (_embedding.py), channel and alpha dropout
(_feature_dropout.py) and dropout between stacked recurrent layers (_recurrent_dropout.py),
which it loses or refuses; other torch.nn operations, torch functions and layers it cannot
export (_unexportable_ops.py, _unexportable_functions.py, _unexportable_layers.py); torch.nn's
loss functions, most of which it cannot export and three of which it exports as another
function (_losses.py), the CTC loss (_ctc_loss.py) and nn.AdaptiveLogSoftmaxWithLoss
(_adaptive_softmax.py); torch.stft (_stft.py) and torch.fft's transforms of real tensors
(_fft.py); in-place writes into slices, which it drops
(_view_writes.py); and each submodule in the mode its user left it. A Python value the
forward reads out of a tensor computed from the data is refused (_data_dependent_values.py):
the trace would keep the example batch's."""

import inspect
import io
import re
import warnings

from . import (_adaptive_softmax, _autocast_regions, _autograd_functions, _circular_pad,
               _ctc_loss, _data_dependent_values, _embedding, _feature_dropout, _fft, _losses,
               _random_fills, _recurrent_dropout, _stft, _stop_gradient, _tracing,
               _unexportable_functions, _unexportable_layers, _unexportable_ops, _view_writes)
from ._errors import export_error, from_torch_export


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
        required = [p.name for p in inspect.signature(module.forward).parameters.values()
                    if p.name in params[:params.index(names[-1])] and p.name not in names
                    and p.default is p.empty] if names else []
        if required:
            raise TypeError(f"example_inputs has no {required[0]!r}, a parameter of "
                            f"{type(module).__name__}.forward without a default")
        return names, [example_inputs[n] for n in names]
    values = list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    if len(values) > len(params):
        raise TypeError(
            f"{len(values)} example inputs for {type(module).__name__}.forward, which takes "
            f"{len(params)}"
        )
    return params[: len(values)], values


def graph_inputs(names, values):
    """The example's tensors (arrays and number lists as tensors) as the file's inputs, and
    its Python numbers, bools, strings and None as constants of the plan, a forward's
    configuration (`double=True`), which torch would make inputs. Returns (names, tensors,
    {name: constant}); raises for a list of tensors, which a plan's inputs cannot hold."""
    import torch

    kept, tensors, constants = [], [], {}
    for name, value in zip(names, values):
        if value is None or isinstance(value, (bool, int, float, str)):
            constants[name] = value
            continue
        if isinstance(value, (list, tuple)) and any(
                isinstance(v, torch.Tensor) for v in value):
            raise export_error(
                f"input '{name}' is a {type(value).__name__} of tensors: a plan takes one "
                "tensor per input; give forward one parameter per tensor")
        try:
            tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as e:
            raise export_error(f"input '{name}' ({type(value).__name__}) is not a tensor or "
                               f"an array: {e}") from None
        kept.append(name)
        tensors.append(tensor)
    return kept, tuple(tensors), constants


def bound_forward(forward, names, outputs_after=(), constants=None):
    """forward as torch.onnx.export calls it: the traced inputs positionally, bound here to
    forward's parameters `names` (by position while they are its leading parameters, then by
    name), its other parameters left to their defaults; the tensors `outputs_after` returned
    after the loss. Given forward itself, torch would bind the inputs by position (an input
    after an optional parameter the example leaves out, forward(x, y, mask=None,
    padding=None) given x, y and padding, would become `mask`) and add forward's remaining
    defaults as inputs of the file (a float `temperature=2.0` among them). `constants`
    (name: value) are passed by name as they are."""
    params = list(inspect.signature(forward).parameters)
    lead = 0
    while lead < len(names) and names[lead] == params[lead]:
        lead += 1

    def bound(*inputs):
        loss = the_loss(forward(*inputs[:lead], **dict(zip(names[lead:], inputs[lead:])),
                                **(constants or {})))
        return (loss, *outputs_after) if outputs_after else loss

    return bound


def the_loss(out):
    """The loss among what forward returns: the tensor itself, the first element of a tuple
    or list (`return loss, logits`), a dict's "loss" (Hugging Face's outputs); the other
    values are not part of a training plan."""
    import torch

    what, origin = type(out).__name__, ""
    if isinstance(out, dict):
        if "loss" not in out:
            raise export_error(f"forward returns a {what} without a 'loss' entry (keys: "
                               f"{', '.join(map(str, list(out)[:6]))}); ampc trains the "
                               "scalar loss forward returns")
        out, origin = out["loss"], f" (its {what}'s 'loss')"
    elif isinstance(out, (tuple, list)) and out:
        out, origin = out[0], f" (the first element of its {what})"
    if not (isinstance(out, torch.Tensor) and out.dim() == 0 and out.is_floating_point()):
        shown = (f"{str(out.dtype).replace('torch.', '')} of shape "
                 f"{[int(d) for d in out.shape]}" if isinstance(out, torch.Tensor)
                 else f"a {type(out).__name__}")
        raise export_error(f"forward's loss{origin} must be a float scalar, not "
                           f"{shown}; return the scalar loss (first in a tuple, 'loss' in a "
                           "dict)")
    return out


def untrained_state(module):
    """The names of the module's floating-point state that torch.optim never changes: its
    buffers (BatchNorm's running statistics, register_buffer tensors, a loss's pos_weight or
    class weights) and the parameters with requires_grad=False. The export writes them as
    initializers like the parameters, and ampc trains every float initializer the loss
    depends on unless it is frozen, so the export records them (UNTRAINED_KEY) and
    ampc.compile freezes them."""
    names = [n for n, p in module.named_parameters() if not p.requires_grad]
    names += [n for n, b in module.named_buffers() if b.is_floating_point()]
    return names


def glob_literal(name):
    """`name` as an fnmatch pattern that matches only itself ([, * and ? bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def export_module(module, example_inputs, opset=17):
    """The ONNX bytes of `module` (forward returns the scalar loss), each submodule in the mode
    it is in (a PyTorch training loop's: model.train(), and a part its user put in eval mode,
    such as a frozen BatchNorm backbone, in eval mode); a module wholly in eval mode is
    exported as it computes, with a warning, since model.train() was most likely forgotten.

    Tracing runs the forward once, which advances BatchNorm's running statistics (and any
    buffer a forward updates) by one batch in the module and in the exported initializers.
    Neither keeps that batch: the module's buffers are put back, and the export holds the
    values they had before, so training starts where the module is.

    A buffer the forward writes other than BatchNorm's statistics (an EMA codebook, a running
    centre, a step counter), whose write torch's export drops, is exported again with its new
    value as an output listed under BUFFER_UPDATES_KEY, which ampc makes the buffer's update
    after each step (passes/buffer_updates.h)."""
    refuse_cumulative_batch_norm(module)
    refuse_orthogonal_parametrizations(module)
    refuse_spectral_norm_of_convolutions(module)
    if not module.training:
        warnings.warn(
            f"ampc: {type(module).__name__} is in eval mode, so its training step computes "
            "what the module computes in eval mode (BatchNorm's running statistics, no "
            "dropout); call model.train() first for training-mode layers", stacklevel=3)
    names, values, constants = graph_inputs(*ordered_inputs(module, example_inputs))
    before = {n: b.detach().clone() for n, b in module.named_buffers()}
    data, changed = _traced(module, names, values, constants, opset, before, [])
    written = forward_written_buffers(module, changed)
    if written:
        data, changed = _traced(module, names, values, constants, opset, before, written)
    return finish_export(data, {n: before[n] for n in changed}, untrained_state(module), written)


def refuse_cumulative_batch_norm(module):
    """Raises for a BatchNorm with momentum=None: PyTorch then averages every batch's
    statistics so far (a factor 1 / num_batches_tracked that changes each step), which torch
    exports as momentum 0, a file whose running statistics are the last batch's only."""
    import torch

    for name, m in module.named_modules():
        if (isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.momentum is None
                and m.track_running_stats):
            raise export_error(
                f"{type(m).__name__} '{name}' with momentum=None: PyTorch keeps a cumulative "
                "average of the batches' statistics, which an ONNX file cannot express (torch "
                "exports it as the last batch's statistics); give it a momentum (0.1 is "
                "PyTorch's default)")


# What each of torch's orthogonal maps computes, none of which ONNX has an op for.
_ORTHOGONAL_MAP_OPS = {"matrix_exp": "a matrix exponential", "cayley": "a linear solve",
                       "householder": "a product of Householder reflections"}


def refuse_orthogonal_parametrizations(module):
    """Raises for a weight under nn.utils.parametrizations.orthogonal: each forward maps the
    stored parameter to an orthogonal matrix by a matrix exponential, a Cayley map's solve or
    Householder reflections, which torch 1.13 cannot export (it fails on aten::mH, naming
    neither the layer nor the parametrization)."""
    from torch.nn.utils import parametrize

    for name, m in module.named_modules():
        if not parametrize.is_parametrized(m):
            continue
        for tensor, chain in m.parametrizations.items():
            for p in chain:
                if type(p).__name__ != "_Orthogonal":
                    continue
                how = getattr(p.orthogonal_map, "name", str(p.orthogonal_map))
                raise export_error(
                    f"nn.utils.parametrizations.orthogonal on '{name + '.' if name else ''}"
                    f"{tensor}' (orthogonal_map '{how}'): its forward computes "
                    f"{_ORTHOGONAL_MAP_OPS.get(how, how)}, which ONNX has no op for and torch "
                    "cannot export; ampc does not train orthogonal parametrizations")


def refuse_spectral_norm_of_convolutions(module):
    """Raises for a convolution under a spectral norm (nn.utils.spectral_norm or its
    parametrization): torch 1.13's exporter loses the shape of the weight the power iteration
    computes, and its convolution symbolic fails on "a kernel of unknown shape" in a message that
    names neither the layer nor the norm. The spectral norms of linear layers train."""
    import torch
    from torch.nn.utils import parametrize
    from torch.nn.utils.spectral_norm import SpectralNorm

    for name, m in module.named_modules():
        if not isinstance(m, torch.nn.modules.conv._ConvNd):
            continue
        tensors = [h.name for h in m._forward_pre_hooks.values() if isinstance(h, SpectralNorm)]
        if parametrize.is_parametrized(m):
            tensors += [t for t, chain in m.parametrizations.items()
                        if any(type(p).__name__ == "_SpectralNorm" for p in chain)]
        if tensors:
            layer = type(m).__name__.removeprefix("Parametrized")  # parametrize's subclass
            raise export_error(
                f"spectral norm of {layer} '{name}' (its '{tensors[0]}'): torch "
                "1.13's exporter loses the shape of the weight the power iteration computes and "
                "cannot export the convolution; ampc trains spectral norms of linear layers only")


def forward_written_buffers(module, changed):
    """The buffers among `changed` that ampc does not update by itself: all but BatchNorm's
    running statistics and counter (the statistics are the BatchNormalization node's
    outputs, passes/running_statistics.h)."""
    import torch

    own = set()
    for prefix, m in module.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            own |= {(prefix + "." if prefix else "") + b
                    for b in ("running_mean", "running_var", "num_batches_tracked")}
    return [n for n in changed if n not in own]


def _traced(module, names, values, constants, opset, before, written):
    """torch.onnx.export of `module` with ampc's tracing rewrites; with `written` buffers'
    final values as outputs after the loss. Returns the bytes and the names of the buffers
    the tracing forward changed (put back to `before`)."""
    import torch

    own_forward = module.__dict__.get("forward")  # an instance attribute the caller set
    buffers = dict(module.named_buffers())
    module.forward = bound_forward(module.forward, names, [buffers[n] for n in written],
                                   constants)
    buf = io.BytesIO()
    # The forward is traced with gradients on, as the training step it stands for runs it:
    # under a caller's torch.no_grad() every result would look detached (_stop_gradient.py).
    with (warnings.catch_warnings(), torch.enable_grad(), _stop_gradient.detach_marked(opset),
          _random_fills.patched(), _autograd_functions.patched(), _circular_pad.patched(),
          _view_writes.patched(), _adaptive_softmax.patched(), _autocast_regions.patched(),
          _tracing.rewriting([_data_dependent_values.checked(module, names),
                              _fft.rewrite, _stop_gradient.rewrite, _embedding.rewrite,
                              _feature_dropout.rewrite, _recurrent_dropout.rewrite,
                              _unexportable_ops.rewrite, _unexportable_functions.rewrite,
                              _unexportable_layers.rewrite, _losses.rewrite, _ctc_loss.rewrite,
                              _stft.rewrite, _view_writes.rewrite],
                             finish=_stop_gradient.detach_under_no_grad,
                             arguments=_view_writes.current_arguments)):
        # torch warns about BatchNorm's num_batches_tracked counter, which the export drops.
        warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
        warnings.filterwarnings("ignore", category=UserWarning, module="torch.onnx")
        try:
            _torch_export(
                module,
                values,
                buf,
                input_names=names,
                output_names=["loss"] + [BUFFER_UPDATE_PREFIX + n for n in written],
                opset_version=opset,
                # Each module in the mode its user left it, as a PyTorch training loop runs
                # it: a backbone put in eval mode keeps BatchNorm's running statistics and no
                # dropout (TRAINING would switch every module to training mode).
                training=torch.onnx.TrainingMode.PRESERVE,
                do_constant_folding=False,
                export_params=True,
                keep_initializers_as_inputs=False,
            )
        finally:
            if own_forward is None:
                del module.forward
            else:
                module.forward = own_forward
            changed = restore_buffers(module, before)
    return buf.getvalue(), changed


def _torch_export(*args, **kwargs):
    """torch.onnx.export, its failures as ampc's exporter's errors (_errors.from_torch_export);
    those ampc's own rewrites raise pass as they are."""
    import torch

    try:
        torch.onnx.export(*args, **kwargs)
    except Exception as e:
        if getattr(e, "ampc_export", False):
            raise
        raise from_torch_export(e) from e


def restore_buffers(module, before):
    """Puts back the buffers' values of `before` (by name); returns the names that differed."""
    import torch

    changed = []
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name in before and not torch.equal(b, before[name]):
                b.copy_(before[name])
                changed.append(name)
    return changed


# The ONNX metadata key under which an export lists the initializers torch.optim would not
# train (one name per line); ampc's compiler leaves them untrained (docs/training.md).
UNTRAINED_KEY = "ampc.untrained"

# The ONNX metadata key under which an export lists the buffers its forward writes (one name
# per line), each with its new value as the graph output BUFFER_UPDATE_PREFIX + name.
BUFFER_UPDATES_KEY = "ampc.buffer_updates"
BUFFER_UPDATE_PREFIX = "ampc.buffer_update/"


def finish_export(data, tensors, untrained=(), written=()):
    """The ONNX model `data` with the initializers named in `tensors` holding those values,
    the names `untrained` recorded under UNTRAINED_KEY, the buffers `written` under
    BUFFER_UPDATES_KEY, and the export's stop-gradient markers written as Identity nodes
    listed under STOP_GRADIENT_KEY (a standard ONNX file)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(data)
    for init in model.graph.initializer:
        if init.name in tensors:
            value = tensors[init.name].cpu().numpy()
            init.CopyFrom(numpy_helper.from_array(value, init.name))
    props = {_stop_gradient.STOP_GRADIENT_KEY: "\n".join(_stop_gradient.as_identities(model))}
    if untrained:
        exported = {init.name for init in model.graph.initializer}
        names = [n for n in untrained if n in exported]
        if names:
            props[UNTRAINED_KEY] = "\n".join(names)
    if written:
        props[BUFFER_UPDATES_KEY] = "\n".join(written)
    regions = _autocast_regions.disabled_regions(model)
    if regions:
        props[_autocast_regions.AUTOCAST_DISABLED_KEY] = regions
    onnx.helper.set_model_props(model, props)
    return model.SerializeToString()
