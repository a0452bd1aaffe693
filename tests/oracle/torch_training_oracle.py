"""PyTorch oracle for training steps of the example models.

For each model (models/{mlp,cnn,gpt}.onnx) and optimizer, trains the functional rebuild of
torch_forward_oracle.py in float64 for 3 steps on the model's first batch with
torch.optim (SGD with momentum, AdamW) and writes the trainable parameters afterwards:

    OUT/<model>_<input>.npy            the batch (as the forward oracle writes it)
    OUT/<model>.<optimizer>/<param>.npy      each trained parameter, trained in float64
    OUT/<model>.<optimizer>.f32/<param>.npy  the same trained by PyTorch in float32

With --schedules it trains the mlp instead with each run of SCHEDULES: parameter groups
(no weight decay for --no-decay patterns, lr multipliers for --lr-mult ones) and a
torch.optim.lr_scheduler schedule stepped after every optimizer step, and writes

    OUT/mlp.<run>/<param>.npy, OUT/mlp.<run>.f32/<param>.npy   the trained parameters
    OUT/mlp.<run>.lr.npy   the lr of the groups without multiplier at each step (float64)

With --gradients it writes, instead of trained parameters, the loss and every trainable
parameter's gradient at the initial parameters, on the same batch:

    OUT/<model>.loss.npy, OUT/<model>.loss.f32.npy    the loss (0-d, float64)
    OUT/<model>.grad/<param>.npy, OUT/<model>.grad.f32/<param>.npy   each gradient

The float32 run tells how far float32 arithmetic alone moves the result: parameters whose
true gradient is zero (a conv bias before BatchNorm, an attention key bias) get Adam
updates of pure rounding noise, so there the float32 results differ from the float64 ones
in PyTorch itself as much as in ampc.

Trainable: every float initializer that reaches the loss through a gradient (BatchNorm
running statistics are updated, not trained, and are not compared here).

    /usr/bin/python3 tests/oracle/torch_training_oracle.py --models-dir models --out DIR
        [--gradients] [MODEL...]
"""
import argparse
import fnmatch
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_forward_oracle as fwd  # noqa: E402

STEPS = 3
# name: (optimizer, keyword arguments, ampc's schedule options, no-decay globs,
# {lr-mult glob: factor}, steps). tests/oracle/lr_schedule_oracle_test.cc compiles the same.
SCHEDULES = {
    "adamw_cosine": (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1},
                     {"kind": "cosine", "warmup": 2, "start": 0.1, "total": 6, "min": 0.0},
                     ["*.bias", "ln1.*"], {"fc2.*": 0.5}, 6),
    "sgd_step": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3},
                 {"kind": "step", "warmup": 0, "step_size": 2, "gamma": 0.5},
                 ["*.bias"], {"fc1.*": 2.0}, 6),
    "adam_linear": (torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.01},
                    {"kind": "linear", "warmup": 3, "start": 0.2, "total": 7, "min": 0.1},
                    [], {}, 6),
}
# name: (torch optimizer, keyword arguments) — ampc's tests compile with the same values.
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "adamw": (torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.01}),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gradients", action="store_true",
                    help="write the loss and the gradients instead of trained parameters")
    ap.add_argument("--schedules", action="store_true",
                    help="train the mlp with each of SCHEDULES instead")
    ap.add_argument("names", nargs="*", default=list(fwd.DATA), help="models (default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    if args.schedules:
        args.names = ["mlp"]
    for name in args.names:
        data_file, members, batch = fwd.DATA[name]
        weights = fwd.initializers(os.path.join(args.models_dir, name + ".onnx"))
        npz = np.load(os.path.join(args.models_dir, "data", data_file))
        inputs = []
        for graph_input, member in members:
            a = np.ascontiguousarray(npz[member][:batch])
            np.save(os.path.join(args.out, f"{name}_{graph_input}.npy"), a)
            inputs.append(torch.from_numpy(a))
        if args.schedules:
            for run, config in SCHEDULES.items():
                for dtype, suffix in ((torch.float64, ""), (torch.float32, ".f32")):
                    train_scheduled(name, weights, inputs, config, dtype,
                                    os.path.join(args.out, f"{name}.{run}{suffix}"))
            continue
        if args.gradients:
            for dtype, suffix in ((torch.float64, ""), (torch.float32, ".f32")):
                gradients(name, weights, inputs, dtype, args.out, suffix)
            continue
        for opt_name, (opt_class, kwargs) in OPTIMIZERS.items():
            for dtype, suffix in ((torch.float64, ""), (torch.float32, ".f32")):
                train(name, weights, inputs, opt_class, kwargs, dtype,
                      os.path.join(args.out, f"{name}.{opt_name}{suffix}"))


def setup(weights, inputs, dtype):
    """Parameters and inputs in `dtype`, and the trainable parameters (requiring grad)."""
    p = fwd.params(weights, dtype)
    ins = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    trainable = {k: v.requires_grad_() for k, v in p.items()
                 if v.is_floating_point() and "running_" not in k}
    return p, ins, trainable


def save_reached(trainable, folder, value):
    """Writes value(param) as float64 for each parameter that reaches the loss."""
    os.makedirs(folder, exist_ok=True)
    for k, v in trainable.items():
        if v.grad is None:  # does not reach the loss: not trained by either side
            continue
        np.save(os.path.join(folder, k + ".npy"), value(v).detach().to(torch.float64).numpy())


def train(name, weights, inputs, opt_class, kwargs, dtype, folder):
    p, ins, trainable = setup(weights, inputs, dtype)
    opt = opt_class(list(trainable.values()), **kwargs)
    for _ in range(STEPS):
        opt.zero_grad()
        fwd.LOSS[name](p, *ins).backward()
        opt.step()
    save_reached(trainable, folder, lambda v: v)


def scheduler(opt, sched):
    """The torch.optim.lr_scheduler chain ampc's options stand for (passes/lr_schedule.h)."""
    lrs = torch.optim.lr_scheduler
    warmup, kind = sched["warmup"], sched["kind"]
    decay_steps = sched.get("total", 0) - warmup
    if kind == "step":
        main = lrs.StepLR(opt, step_size=sched["step_size"], gamma=sched["gamma"])
    elif kind == "cosine":  # eta_min is absolute in torch: the groups' lr differ, so 0 here
        main = lrs.CosineAnnealingLR(opt, T_max=decay_steps, eta_min=0.0)
    elif kind == "linear":
        main = lrs.LinearLR(opt, start_factor=1.0, end_factor=sched["min"],
                            total_iters=decay_steps)
    else:
        main = lrs.ConstantLR(opt, factor=1.0, total_iters=0)
    if warmup == 0:
        return main
    warm = lrs.LinearLR(opt, start_factor=sched["start"], end_factor=1.0, total_iters=warmup)
    return lrs.SequentialLR(opt, [warm, main], milestones=[warmup])


def train_scheduled(name, weights, inputs, config, dtype, folder):
    opt_class, kwargs, sched, no_decay, lr_mult, steps = config
    p, ins, trainable = setup(weights, inputs, dtype)
    groups = {}
    for k, v in trainable.items():
        wd = 0.0 if any(fnmatch.fnmatchcase(k, pat) for pat in no_decay) else kwargs["weight_decay"]
        mult = next((f for pat, f in lr_mult.items() if fnmatch.fnmatchcase(k, pat)), 1.0)
        groups.setdefault((wd, mult), []).append(v)
    opt = opt_class([{"params": ps, "weight_decay": wd, "lr": kwargs["lr"] * mult}
                     for (wd, mult), ps in groups.items()], **kwargs)
    base = next(i for i, (_, mult) in enumerate(groups) if mult == 1.0)
    sch = scheduler(opt, sched)
    used = []
    for _ in range(steps):
        used.append(opt.param_groups[base]["lr"])
        opt.zero_grad()
        fwd.LOSS[name](p, *ins).backward()
        opt.step()
        sch.step()
    save_reached(trainable, folder, lambda v: v)
    if dtype == torch.float64:
        np.save(folder + ".lr.npy", np.array(used, dtype=np.float64))


def gradients(name, weights, inputs, dtype, out, suffix):
    p, ins, trainable = setup(weights, inputs, dtype)
    loss = fwd.LOSS[name](p, *ins)
    loss.backward()
    np.save(os.path.join(out, f"{name}.loss{suffix}.npy"),
            loss.detach().to(torch.float64).numpy())
    save_reached(trainable, os.path.join(out, f"{name}.grad{suffix}"), lambda v: v.grad)


if __name__ == "__main__":
    main()
