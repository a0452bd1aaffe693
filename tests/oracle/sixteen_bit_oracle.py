"""One mixed-precision training step of `ampc train` against 16-bit PyTorch references.

For models/mlp.onnx and models/gpt.onnx in fp16 (dynamic loss scaling, ampc's default) and
bf16 (no scaling): `ampc train --steps 1 --optimizer sgd --lr LR` on the model's first
batch, then

- the loss of the step's log against the reference's loss,
- the update p1 - p0 of every parameter (from the checkpoint) against -LR * g, g the
  reference's unscaled gradient: with plain SGD the update is the gradient times -LR, so
  this checks every gradient and the update at once,

the references being tests/oracle/amp_reference.py (fp16 done by hand as CUDA autocast
does it; bf16 with PyTorch's CPU autocast). Errors are relative, ||ampc - ref|| / ||ref||,
per parameter. For the few parameters whose exact gradient is zero (gpt's attention key
biases: softmax is invariant to them) both sides hold rounding noise, so there the error is
measured against the norm of the whole update instead.

The bounds (GRADIENT_BOUND, LOSS_BOUND): u = 2^-11 for fp16 and 2^-8 for bf16 is the relative
rounding error of one stored 16-bit value. ampc and the reference round the same GEMM operands
and results but differ in the 16-bit values they store elsewhere (ampc stores FOLLOW ops'
results in 16 bits: residual adds, scaling, the GELU rounded once as PyTorch's gelu; the fp16
reference keeps them in fp32; torch's bf16 CPU autocast also runs softmax in bf16) and in the
order of fp32 sums. A gradient element is a chain of about 10 such stored values on the longest
path of gpt, each an independent error of at most u, so the typical relative error is about
sqrt(10) u ~ 3u; 8u bounds a parameter's gradient (fp16: 3.9e-3, bf16: 3.1e-2), while a 2x wrong
gradient, a wrong unscale or a missing term is an error of order 1 (measured: fp16 0.8u, bf16
1.05u at worst, gpt's attention query weights; 1.1u and 1.1u while ampc rounded the exported
GELU after each of its five ops). The loss is a mean over the batch, whose independent rounding
errors average out: u (fp16: 4.9e-4, bf16: 3.9e-3; measured 0.02u).

    /usr/bin/python3 tests/oracle/sixteen_bit_oracle.py --ampc BIN --models-dir models
        --out DIR CASE   (CASE: mlp-fp16, gpt-fp16, mlp-bf16, gpt-bf16)
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amp_reference as ref  # noqa: E402
import torch_forward_oracle as fwd  # noqa: E402

U = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
GRADIENT_BOUND = {"fp16": 8 * U["fp16"], "bf16": 8 * U["bf16"]}
LOSS_BOUND = {"fp16": U["fp16"], "bf16": U["bf16"]}
SCALE = {"fp16": 65536.0, "bf16": 1.0}  # ampc's defaults: dynamic from 2^16 / none
LR = 0.1


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
    return r.stdout


def checkpoint_state(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def batch(models_dir, name):
    data_file, members, size = fwd.DATA[name]
    npz = np.load(os.path.join(models_dir, "data", data_file))
    return os.path.join(models_dir, "data", data_file), [
        torch.from_numpy(np.ascontiguousarray(npz[m][:size])) for _, m in members]


def reference(name, weights, inputs, precision, dtype=torch.float32):
    p = fwd.params(weights, dtype)
    trainable = {k: v.requires_grad_() for k, v in p.items() if v.is_floating_point()}
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    loss, found_inf = ref.scaled_step_gradients(name, p, trainable, inputs, precision,
                                                SCALE.get(precision, 1.0))
    grads = {k: v.grad.to(torch.float64).numpy() for k, v in trainable.items()
             if v.grad is not None}
    return loss, found_inf, grads


def check(args, name, precision):
    out = os.path.join(args.out, f"{name}-{precision}")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(args.models_dir, name + ".onnx")
    data, inputs = batch(args.models_dir, name)
    log, ckpt = os.path.join(out, "log.jsonl"), os.path.join(out, "ckpt.onnx")
    run([args.ampc, "train", model, "--data", data, "--steps", "1", "--optimizer", "sgd",
         "--lr", str(LR), "--precision", precision, "--log", log, "--checkpoint", ckpt])
    with open(log) as f:
        entry = json.loads(f.readline())
    if entry["skipped"]:
        sys.exit(f"{name} {precision}: ampc skipped the step")

    weights = fwd.initializers(model)
    loss, found_inf, grads = reference(name, weights, inputs, precision)
    if found_inf:
        sys.exit(f"{name} {precision}: the reference's gradients are not finite")
    _, _, exact = reference(name, weights, inputs, "fp32", torch.float64)
    state = checkpoint_state(ckpt)
    prefix = f"{name} {precision}:"
    failures = []
    loss_err = abs(entry["loss"] - loss) / abs(loss)
    print(f"{prefix} loss ampc {entry['loss']:.7g} reference {loss:.7g} rel.err {loss_err:.2e}"
          f" (bound {LOSS_BOUND[precision]:.2e})")
    if loss_err > LOSS_BOUND[precision]:
        failures.append(f"loss: relative error {loss_err:.2e}")

    want = {k: -LR * g for k, g in grads.items()}
    whole = np.sqrt(sum(float(np.sum(w * w)) for w in want.values()))
    exact_whole = np.sqrt(sum(float(np.sum(g * g)) for g in exact.values()))
    worst, worst_name = 0.0, ""
    for k, w in sorted(want.items()):
        have = state[k].astype(np.float64) - weights[k].astype(np.float64)
        # A gradient that is zero in exact arithmetic (float64, no rounding) is noise on both
        # sides: measure it against the whole update.
        zero = np.linalg.norm(exact[k]) <= 1e-9 * exact_whole
        denom = whole if zero else np.linalg.norm(w)
        err = np.linalg.norm(have - w) / denom
        print(f"{prefix} {k:32s} update rel.err {err:.2e}" + (" (zero gradient: vs the whole "
                                                               "update)" if zero else ""))
        if err > worst:
            worst, worst_name = err, k
        if err > GRADIENT_BOUND[precision]:
            failures.append(f"'{k}': update relative error {err:.2e}")
    missing = set(want) - set(state)
    if missing:
        failures.append(f"not in the checkpoint: {sorted(missing)}")
    print(f"{prefix} {len(want)} parameters, worst update error {worst:.2e} ({worst_name}), "
          f"bound {GRADIENT_BOUND[precision]:.2e}")
    if failures:
        sys.exit(f"{prefix} " + "; ".join(failures))
    print(f"{prefix} ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("case", choices=["mlp-fp16", "gpt-fp16", "mlp-bf16", "gpt-bf16"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    name, precision = args.case.split("-")
    check(args, name, precision)


if __name__ == "__main__":
    main()
