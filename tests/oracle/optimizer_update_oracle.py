"""The optimizer's update p - p0 of `ampc train` against torch.optim, option by option.

For one optimizer configuration (CASE, see CASES) and models/mlp.onnx and models/gpt.onnx:
`ampc train MODEL --steps 3 <options> --checkpoint C` on the first three batches of the
model's data (file order), and PyTorch's functional rebuild of the model
(torch_forward_oracle.py) trained by torch.optim with the same options on the same batches,
in float64 (the reference) and in float32 (to see PyTorch's own rounding).

The error is measured on the update, ||(p_ampc - p0) - (p_torch - p0)|| / ||p_torch - p0||
per parameter: three steps move a parameter by a small fraction of its norm, so an error
relative to the parameter (torch_training_oracle_test) hides a wrong term of the update
(AdamW's decay with lr 1e-3 and decay 0.01 moves a parameter by 3e-5 of its norm). Weight
decay is 0.1 so that the decay term is about a percent of the update or more.

Bound: 1e-4, or where PyTorch's float32 update is itself further than that from float64
(parameters whose true gradient is zero, gpt's attention key biases: Adam turns rounding
noise into full-size steps), 4 times PyTorch's float32 error (ampc sums in another order).
Where the float64 update is nothing at all (below 1e-6 of the whole update: a zero gradient
with a large eps), errors are measured against the norm of the whole update instead.

    /usr/bin/python3 tests/oracle/optimizer_update_oracle.py --ampc BIN --models-dir models
        --out DIR CASE
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_forward_oracle as fwd  # noqa: E402

STEPS = 3
BOUND = 1e-4
NOISE_FACTOR = 4

# case: (ampc options, torch optimizer, its keyword arguments)
CASES = {
    "sgd": (["--optimizer", "sgd", "--lr", "0.1"], torch.optim.SGD, {"lr": 0.1}),
    "sgd-momentum": (["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"],
                     torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-weight-decay": (["--optimizer", "sgd", "--lr", "0.1", "--weight-decay", "0.1"],
                         torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.1}),
    "sgd-nesterov-weight-decay": (
        ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--nesterov",
         "--weight-decay", "0.1"],
        torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    "adam-l2": (["--optimizer", "adam", "--lr", "1e-3", "--weight-decay", "0.1"],
                torch.optim.Adam, {"lr": 1e-3, "weight_decay": 0.1}),
    "adamw": (["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.1"],
              torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 0.1}),
    # eps 1e-4 is about the size of sqrt(v) here, so a wrong or ignored eps shows.
    "adam-betas-eps": (["--optimizer", "adam", "--lr", "1e-3", "--betas", "0.8,0.99",
                        "--eps", "1e-4"],
                       torch.optim.Adam, {"lr": 1e-3, "betas": (0.8, 0.99), "eps": 1e-4}),
    "adamw-betas-eps": (["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.1",
                         "--betas", "0.5,0.9", "--eps", "1e-4"],
                        torch.optim.AdamW,
                        {"lr": 1e-3, "weight_decay": 0.1, "betas": (0.5, 0.9), "eps": 1e-4}),
}
MODELS = ["mlp", "gpt"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)


def torch_updates(name, weights, batches, opt_class, kwargs, dtype):
    p = fwd.params(weights, dtype)
    trainable = {k: v.requires_grad_() for k, v in p.items() if v.is_floating_point()}
    opt = opt_class(list(trainable.values()), **kwargs)
    for inputs in batches:
        ins = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
        opt.zero_grad()
        fwd.LOSS[name](p, *ins).backward()
        opt.step()
    return {k: v.detach().to(torch.float64).numpy() - weights[k].astype(np.float64)
            for k, v in trainable.items() if v.grad is not None}


def check(args, case, name):
    options, opt_class, kwargs = CASES[case]
    out = os.path.join(args.out, f"{case}-{name}")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(args.models_dir, name + ".onnx")
    data_file, members, size = fwd.DATA[name]
    data = os.path.join(args.models_dir, "data", data_file)
    ckpt = os.path.join(out, "ckpt.onnx")
    run([args.ampc, "train", model, "--data", data, "--steps", str(STEPS), "--checkpoint", ckpt]
        + options)
    npz = np.load(data)
    batches = [[torch.from_numpy(np.ascontiguousarray(npz[m][s * size:(s + 1) * size]))
                for _, m in members] for s in range(STEPS)]
    weights = fwd.initializers(model)
    want = torch_updates(name, weights, batches, opt_class, kwargs, torch.float64)
    torch32 = torch_updates(name, weights, batches, opt_class, kwargs, torch.float32)
    state = {t.name: numpy_helper.to_array(t) for t in onnx.load(ckpt).graph.initializer}
    failures, worst = [], (0.0, "")
    whole = np.sqrt(sum(float(np.sum(w * w)) for w in want.values()))
    for k, w in sorted(want.items()):
        if k not in state:
            failures.append(f"'{k}' is not in the checkpoint")
            continue
        have = state[k].astype(np.float64) - weights[k].astype(np.float64)
        # A parameter whose float64 update is nothing (its exact gradient is zero) is measured
        # against the whole update: its own is rounding noise on every side.
        zero = np.linalg.norm(w) <= 1e-6 * whole
        norm = whole if zero else np.linalg.norm(w)
        err = np.linalg.norm(have - w) / norm
        noise = np.linalg.norm(torch32[k] - w) / norm
        bound = max(BOUND, NOISE_FACTOR * noise)
        print(f"{case} {name}: {k:32s} update rel.err {err:.2e} (torch float32 {noise:.2e}, "
              f"bound {bound:.2e})" + (" zero gradient: vs the whole update" if zero else ""))
        if err > bound:
            failures.append(f"'{k}': update relative error {err:.2e} above {bound:.2e}")
        if bound == BOUND and err > worst[0]:
            worst = (err, k)
    print(f"{case} {name}: {len(want)} parameters, worst update error {worst[0]:.2e} "
          f"({worst[1]}), bound {BOUND:g}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("case", choices=sorted(CASES))
    args = ap.parse_args()
    torch.set_num_threads(1)
    failures = []
    for name in MODELS:
        failures += [f"{name}: {f}" for f in check(args, args.case, name)]
    if failures:
        sys.exit(f"{args.case}: " + "; ".join(failures))
    print(f"{args.case}: ok")


if __name__ == "__main__":
    main()
