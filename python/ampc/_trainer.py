"""ampc.compile, ampc.load and the Trainer they return (the engine is ampc._ampc)."""

import os
import tempfile
from typing import Dict, NamedTuple, Optional

import numpy as np

from . import _ampc
from ._ampc import Error

# The keywords of compile() that are options of `ampc compile --train` (TrainOptions).
_OPTION_NAMES = (
    "precision", "optimizer", "lr", "momentum", "nesterov", "weight_decay", "betas", "eps",
    "lr_schedule", "warmup_steps", "warmup_start_factor", "total_steps", "step_size", "gamma",
    "min_lr_factor", "no_decay", "lr_mult", "loss_scale", "init_scale", "growth_factor",
    "backoff_factor", "growth_interval", "min_scale", "max_scale", "skip_nonfinite",
    "clip_grad_norm", "accum_steps", "freeze", "losses", "input_shapes", "log_grad_norm",
    "allow", "deny", "follow", "keep_fp32", "policy", "recast_weights",
    "recompute_elementwise", "batchnorm_running_var", "fusion", "target",
)
# Those of them that take one string or several.
_LIST_NAMES = ("freeze", "losses", "input_shapes", "allow", "deny", "follow", "keep_fp32",
               "no_decay")


class StepResult(NamedTuple):
    """What one optimizer step reports: the fields of a line of `ampc train --log`.

    loss: the step's forward loss (with several losses their sum; with accumulation the mean
        over the micro-batches), as float32 rounds it.
    scale: the loss scale the step used (None without loss scaling).
    skipped: whether the step was skipped because its gradients were not finite.
    grad_norm: the gradients' global 2-norm after unscaling (None when not computed).
    lr: the learning rate the step used (nan when the plan has none).
    step: the optimizer steps done, this one included.
    losses: each loss by name, when the plan minimises several.
    """

    loss: float
    scale: Optional[float]
    skipped: bool
    grad_norm: Optional[float]
    lr: float
    step: int
    losses: Dict[str, float]

    def __float__(self) -> float:
        return self.loss


def _is_torch_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _as_array(name, value, copies):
    """`value` as a C-contiguous numpy array, without a copy when it is one already (a numpy
    array, or a CPU torch tensor, which shares its memory through .numpy()). The names of
    inputs that had to be copied (another device, another layout, not an array) go to
    `copies`. Element types are not converted: the plan's are checked by the engine."""
    if _is_torch_tensor(value):
        import torch

        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
            copies.append(name)
        if t.dtype == torch.bfloat16:
            raise Error(f"input '{name}' is a bfloat16 tensor, which numpy cannot hold; pass float32")
        if not t.is_contiguous():
            t = t.contiguous()
            if name not in copies:
                copies.append(name)
        return t.numpy()
    if isinstance(value, np.ndarray):
        if value.flags.c_contiguous:
            return value
        copies.append(name)
        return np.ascontiguousarray(value)
    if hasattr(value, "__array_interface__") or hasattr(value, "__buffer__"):
        array = np.asarray(value)
        if array.flags.c_contiguous:
            return array
    copies.append(name)
    return np.ascontiguousarray(np.asarray(value))


def _merge(inputs, kwargs, what):
    if inputs is None:
        return dict(kwargs)
    if not isinstance(inputs, dict):
        raise TypeError(f"{what} takes a dict of arrays or keyword arrays, not {type(inputs).__name__}")
    merged = dict(inputs)
    merged.update(kwargs)
    return merged


class Trainer:
    """A compiled training step of ampc, run on the CPU backend: one optimizer step per
    step() call, with the same plan, runtime and checkpoints as `ampc train`.

    Made by ampc.compile() or ampc.load(). Inputs are numpy arrays or torch tensors named as
    the model's inputs (for an exported module: its forward's parameters), with the plan's
    element types and shapes; a contiguous array of the right type is read where it is.
    """

    def __init__(self, engine, source):
        self._engine = engine
        self._source = source
        #: Names of the inputs the last step() or eval() had to copy (another device, a
        #: non-contiguous layout, or not an array); empty when every input was read in place.
        self.last_step_copies = []

    def __repr__(self):
        inputs = ", ".join(f"{n}: {t}{list(s)}" for n, (t, s) in self.inputs.items())
        return (
            f"<ampc.Trainer of {self._source!r}: inputs {inputs}; accum_steps "
            f"{self.accum_steps}; {self.steps_done} steps done>"
        )

    @property
    def inputs(self):
        """{name: (element type, shape)} that step() takes: the plan's inputs as compiled, or
        with gradient accumulation an optimizer step's micro-batches (accum_steps of them)
        stacked on the first axis, which every input then shares."""
        return {n: (t, tuple(s)) for n, (t, s) in self._engine.step_inputs().items()}

    @property
    def accum_steps(self):
        """Micro-batches per optimizer step (gradient accumulation); 1 without."""
        return self._engine.accum_steps

    @property
    def batch_size(self):
        """Samples per micro-batch: the first axis the inputs share; None when they share
        none (a sequence-first [T, B, F] input beside [B] labels, a scalar input)."""
        return self._engine.batch or None

    @property
    def losses(self):
        """The outputs the plan minimises."""
        return list(self._engine.losses)

    @property
    def steps_done(self):
        """Optimizer steps done (after load(): counted from the checkpoint's)."""
        return self._engine.steps_done

    def _arrays(self, inputs):
        copies = []
        arrays = {name: _as_array(name, value, copies) for name, value in inputs.items()}
        self.last_step_copies = copies
        return arrays

    def step(self, inputs=None, /, **kwargs):
        """Run one optimizer step on a batch; returns a StepResult (float(result) is the loss).

        trainer.step(x=x, y=y) or trainer.step({"x": x, "y": y}). Each input must have the
        plan's element type and shape (see .inputs); anything else raises ampc.Error naming
        the input before the step runs. The GIL is released while the step runs.
        """
        arrays = self._arrays(_merge(inputs, kwargs, "step()"))
        r = self._engine.step(arrays)
        return StepResult(
            loss=r["loss"], scale=r["scale"], skipped=r["skipped"], grad_norm=r["grad_norm"],
            lr=r["lr"], step=r["step"], losses=dict(r["losses"]),
        )

    def eval(self, inputs=None, /, **kwargs):
        """Held-out loss (and accuracy, for a classification loss) over any number of samples,
        as `ampc train --eval` computes it: the model in inference mode with the current
        weights, every sample counted once. Returns {"samples", "loss", "accuracy",
        "unused_samples"} (accuracy None when the loss is not a classification's)."""
        arrays = self._arrays(_merge(inputs, kwargs, "eval()"))
        return dict(self._engine.evaluate(arrays))

    def state_dict(self):
        """The model's parameters and buffers as numpy arrays (copies), keyed by the torch
        names (the ONNX initializers' names)."""
        state = self._engine.state()
        return {name: state[name] for name in self._engine.model_state_names}

    def optimizer_state_dict(self):
        """The rest of the plan's state: optimizer moments and step, loss scaler, lr."""
        model = set(self._engine.model_state_names)
        return {n: v for n, v in self._engine.state().items() if n not in model}

    def load_state_dict(self, state_dict, strict=True):
        """Set parameters (and any other state the plan holds) from numpy arrays or torch
        tensors keyed by name; values are converted to the plan's element types. With
        strict, every model parameter must be given. All or nothing: on an error (an unknown
        name, a wrong shape) no value has changed."""
        current = self._engine.state()
        unknown = [n for n in state_dict if n not in current]
        if unknown:
            raise Error(f"the plan has no state named {', '.join(map(repr, unknown))}")
        if strict:
            missing = [n for n in self._engine.model_state_names if n not in state_dict]
            if missing:
                raise Error(f"load_state_dict: missing {', '.join(map(repr, missing))} (strict=False to allow)")
        arrays = {}
        for name, value in state_dict.items():
            if _is_torch_tensor(value):
                value = value.detach().cpu().numpy()
            arrays[name] = np.ascontiguousarray(value, dtype=current[name].dtype)
        self._engine.update_state(arrays)

    def copy_to(self, module):
        """Write the trained weights into a torch.nn.Module (in place) whose state_dict names
        match the plan's (as for the module ampc.compile exported). Returns the names copied;
        raises ampc.Error when none match."""
        import torch

        ours = self.state_dict()
        copied = []
        with torch.no_grad():
            for name, tensor in module.state_dict().items():
                if name in ours:
                    value = torch.from_numpy(ours[name])
                    if tuple(value.shape) != tuple(tensor.shape):
                        raise Error(
                            f"copy_to: '{name}' is {list(value.shape)} here, {list(tensor.shape)} in the module"
                        )
                    tensor.copy_(value.to(tensor.dtype))
                    copied.append(name)
        if not copied:
            raise Error(f"copy_to: no name of {type(module).__name__}'s state_dict is state of this plan")
        return copied

    def save(self, path, data_position=None):
        """Write an ONNX checkpoint as `ampc train --checkpoint` does (trained model and every
        piece of state, the step count); `ampc train --resume` and ampc.load() read it.
        data_position (the CLI's next batch index) defaults to the batches fed so far."""
        self._engine.save(os.fspath(path), data_position)

    def save_plan(self, path):
        """Write the compiled plan, as `ampc compile --train -o` would: `ampc train` runs it."""
        self._engine.save_plan(os.fspath(path))

    def _input_addresses(self):
        """The address each input was read from by the last step() (its first micro-batch)."""
        return dict(self._engine.last_input_addresses())


def _options(given_values):
    options = _ampc.TrainOptions()
    given = []
    for name in _OPTION_NAMES:
        value = given_values.get(name)
        if value is None:
            continue
        if name in _LIST_NAMES and isinstance(value, str):
            value = [value]
        if name == "betas":
            value = tuple(value)
        if name == "loss_scale" and not isinstance(value, str):
            value = f"static:{float(value):g}"
        if name == "policy":
            value = os.fspath(value)
        if name == "lr_mult":
            value = _lr_multipliers(value)
        setattr(options, name, list(value) if name in _LIST_NAMES else value)
        given.append(name)
    options.given = given
    # Where the plan runs is not an option of the plan (a plan file takes it too).
    options.device = given_values.get("device") or "cpu"
    return options


def _lr_multipliers(value):
    """lr_mult as [(pattern, factor)]: from a dict {pattern: factor} (in its order: the first
    match applies) or a list of pairs."""
    pairs = value.items() if isinstance(value, dict) else value
    try:
        return [(str(pattern), float(factor)) for pattern, factor in pairs]
    except (TypeError, ValueError):
        raise Error(f"lr_mult {value!r}: expected {{pattern: factor}} (for example "
                    f"{{'*.bias': 2.0}})") from None


def _check_device(device):
    # The engine parses it as `ampc train --device` does (cpu, cuda, cuda:N) and, for a GPU,
    # opens it: a machine without one raises the command line's "no CUDA device".
    if not isinstance(device, str):
        raise Error(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")


def compile(model, example_inputs=None, *, precision=None, optimizer=None, lr=None,
            momentum=None, nesterov=False, weight_decay=None, betas=None, eps=None,
            lr_schedule=None, warmup_steps=None, warmup_start_factor=None, total_steps=None,
            step_size=None, gamma=None, min_lr_factor=None, no_decay=None, lr_mult=None,
            loss_scale=None, init_scale=None, growth_factor=None, backoff_factor=None,
            growth_interval=None, min_scale=None, max_scale=None, skip_nonfinite=False,
            clip_grad_norm=None, accum_steps=None, freeze=None, loss=None,
            input_shapes=None, grad_norm=None, allow=None, deny=None, follow=None, keep_fp32=None,
            policy=None, recast_weights=False, recompute_elementwise=False,
            batchnorm_running_var=None, fusion=True, target="cpu", device="cpu", seed=0,
            export_path=None):
    """Compile a model's training step with ampc and return a Trainer.

    model: a torch.nn.Module whose forward(inputs..., labels) returns the scalar loss (it is
        exported with torch.onnx.export, each submodule in the mode it is in: call
        model.train() first, as before a PyTorch training loop; a part left in eval mode,
        such as a frozen BatchNorm backbone, computes in eval mode),
        or the path of an ONNX model of that kind, or of a plan from `ampc compile --train`.
    example_inputs: for a module, one batch (a dict keyed by forward's parameter names, or a
        tuple in their order): it fixes the names, element types and shapes, the batch size
        included. For an ONNX file, optional: the shapes of its inputs (as input_shapes).

    The options are those of `ampc compile --train` (docs/training.md, docs/mixed-precision.md);
    None leaves the command line's default. A plan file takes none of them.
      precision: "fp16" (default for models), "bf16" or "fp32": autocast as torch.autocast,
          fp32 master weights.
      optimizer: "sgd" (default), "adam", "adamw"; lr (1e-3), momentum, nesterov,
          weight_decay, betas=(b1, b2), eps.
      lr_schedule: "constant" (default), "step", "cosine" or "linear", computed in the plan
          from the optimizer step; warmup_steps, warmup_start_factor (0.01), total_steps
          (cosine, linear), step_size and gamma (step), min_lr_factor (docs/training.md,
          "Learning-rate schedules and parameter groups").
      no_decay: glob patterns of parameters without weight decay; lr_mult: {pattern: factor}
          (the first matching pattern's factor times the lr).
      loss_scale: "dynamic" (fp16's default), "none", or a number (a static scale);
          init_scale, growth_factor (2), backoff_factor (0.5), growth_interval (2000),
          min_scale, max_scale; skip_nonfinite: skip steps with non-finite gradients even
          without loss scaling; clip_grad_norm.
      accum_steps: micro-batches per optimizer step (step() then takes them stacked).
      freeze: glob patterns of parameters not to train (for a module, its buffers and its
          parameters with requires_grad=False are frozen as well, as torch.optim leaves
          them); loss: the output(s) to minimise.
      input_shapes: ["x=32x64", ...] to fix an ONNX model's dynamic dimensions.
      grad_norm: compute the gradients' norm every step (StepResult.grad_norm; default True
          for models).
      allow, deny, follow: op types (one or a list) moved to autocast's low-precision, fp32 or
          follow-the-inputs class; keep_fp32: node-name glob patterns computed in fp32; policy:
          a JSON file of these overrides (docs/mixed-precision.md).
      recast_weights: cast the fp32 parameters to fp16/bf16 in every step instead of keeping
          the 16-bit copies the optimizer writes (2 bytes less state per parameter, slower
          steps; the same losses).
      recompute_elementwise: compute elementwise results the backward reads (a GELU's erf and
          exp) again there instead of keeping them from the forward (less memory, more
          arithmetic; the same losses).
      batchnorm_running_var: "unbiased" (PyTorch's nn.BatchNorm: the default for a module and
          for a file PyTorch exported) or "biased" (ONNX's BatchNormalization): which batch
          variance the running variance blends in.
      fusion: fused kernels (default True); target: "cpu", "cuda:sm_80" or "cuda:sm_90" (the
          PTX a saved plan carries).
    device: "cpu" (default), "cuda" or "cuda:N": where the plan runs, with the command line's
        backend (`ampc train --device`); for a GPU an ONNX model or module is compiled for it
        (target "cuda:sm_XX" of the device at hand) unless target names one. Inputs are
        copied to the device each step; eval() runs on the CPU with the trained state.
    seed: the seed of dropout masks, as `ampc train --seed`.
    export_path: where to keep the ONNX export of a module (default: a temporary file).

    Raises ampc.Error with the command line's message when the model cannot be compiled.
    """
    _check_device(device)
    values = dict(
        precision=precision, optimizer=optimizer, lr=lr, momentum=momentum,
        nesterov=nesterov or None, weight_decay=weight_decay, betas=betas, eps=eps,
        lr_schedule=lr_schedule, warmup_steps=warmup_steps,
        warmup_start_factor=warmup_start_factor, total_steps=total_steps, step_size=step_size,
        gamma=gamma, min_lr_factor=min_lr_factor, no_decay=no_decay, lr_mult=lr_mult,
        loss_scale=loss_scale, init_scale=init_scale, growth_factor=growth_factor,
        backoff_factor=backoff_factor, growth_interval=growth_interval, min_scale=min_scale,
        max_scale=max_scale, skip_nonfinite=skip_nonfinite or None,
        clip_grad_norm=clip_grad_norm, accum_steps=accum_steps,
        freeze=freeze, losses=loss, input_shapes=input_shapes, log_grad_norm=grad_norm,
        allow=allow, deny=deny, follow=follow, keep_fp32=keep_fp32, policy=policy,
        recast_weights=True if recast_weights else None,
        recompute_elementwise=True if recompute_elementwise else None,
        batchnorm_running_var=batchnorm_running_var,
        target=None if target == "cpu" else target, fusion=None if fusion else False,
    )
    values["device"] = device
    if not isinstance(model, (str, os.PathLike)):
        if example_inputs is None:
            raise TypeError("compiling a torch module needs example_inputs (one batch)")
        from ._export import export_module, glob_literal, untrained_state

        data = export_module(model, example_inputs)
        # What PyTorch would not train, ampc does not either (buffers, requires_grad=False).
        user = [freeze] if isinstance(freeze, str) else list(freeze or [])
        untrained = [glob_literal(n) for n in untrained_state(model)]
        values["freeze"] = (user + untrained) or None
        name = type(model).__name__
        return _compile_export(data, name, values, seed, export_path)
    path = os.fspath(model)
    if example_inputs is not None and input_shapes is None and not path.endswith(".plan"):
        shapes = example_inputs.items() if isinstance(example_inputs, dict) else []
        values["input_shapes"] = ["%s=%s" % (n, "x".join(str(d) for d in np.shape(v))) for n, v in shapes] or None
    return _make(path, values, seed)


def _defaults_for_model(values):
    values = dict(values)
    if values["precision"] is None:
        values["precision"] = "fp16"
        values["_default_precision"] = True
    if values["log_grad_norm"] is None:
        values["log_grad_norm"] = True
        values["_default_grad_norm"] = True
    return values


def _make(path, values, seed):
    is_plan = path.endswith(".plan") or _ampc.looks_like_plan(path)
    if not is_plan:
        values = _defaults_for_model(values)
    options = _options(values)
    # Defaults the Python API chose are not options the caller gave.
    options.given = [
        n for n in options.given
        if not (n == "precision" and values.get("_default_precision"))
        and not (n == "log_grad_norm" and values.get("_default_grad_norm"))
    ]
    return Trainer(_ampc.Trainer(path, options, seed), path)


def _compile_export(data, name, values, seed, export_path):
    if export_path is not None:
        with open(export_path, "wb") as f:
            f.write(data)
        trainer = _make(os.fspath(export_path), values, seed)
    else:
        with tempfile.TemporaryDirectory(prefix="ampc-") as d:
            path = os.path.join(d, f"{name}.onnx")
            with open(path, "wb") as f:
                f.write(data)
            trainer = _make(path, values, seed)
    trainer._source = f"{name} (torch.nn.Module)"
    return trainer


def load(checkpoint, model=None, example_inputs=None, *, seed=0, **options):
    """A Trainer resumed from an ONNX checkpoint (trainer.save() or `ampc train
    --checkpoint`): every piece of state and the step count, so that training goes on bit
    for bit as if it had not stopped (`ampc train --resume`).

    model: what the checkpoint was trained from (the plan file, ONNX model or torch module,
        with the same options as then), compiled again here; None trains the checkpoint
        itself (an ONNX model in training format, which holds its training step: no options).
    """
    if model is None:
        options.setdefault("precision", "fp32")
        trainer = compile(checkpoint, seed=seed, **options)
    else:
        trainer = compile(model, example_inputs, seed=seed, **options)
    trainer._engine.load_checkpoint(os.fspath(checkpoint))
    return trainer
