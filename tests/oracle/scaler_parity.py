"""Loss-scaler parity of `ampc train` with PyTorch's GradScaler rules, on models/mlp.onnx.

1. Dynamic scaling with a short growth interval and non-finite values injected into the
   batches of chosen steps (inf or NaN in one input element: the gradients are not finite):
   the log's scale (the scale each step used) and skipped flags, and the growth tracker and
   scale in the checkpoint after every step, equal an independent reimplementation of
   torch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu; torch 1.13 has no
   CPU kernel for it). The run is made of one-step resumed runs, each writing a checkpoint:
   on skipped steps every parameter and optimizer state is bit-identical to the step
   before, and the last checkpoint equals, bit for bit, that of one uninterrupted run.
2. The same with --min-scale / --max-scale bounds.
3. --clip-grad-norm against torch.nn.utils.clip_grad_norm_ in float32 (SGD, 3 steps): the
   logged grad_norm per step and the trained parameters, relative error <= 1e-5.

    /usr/bin/python3 tests/oracle/scaler_parity.py --ampc BIN --models-dir models --out DIR
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
import torch_forward_oracle as fwd  # noqa: E402

BATCH = 32


def update_scale(scale, tracker, found_inf, growth, backoff, interval, lo=None, hi=None):
    """torch's _amp_update_scale_ (fp32 scale, int32 tracker) plus ampc's optional bounds."""
    scale = np.float32(scale)
    if found_inf:
        scale = np.float32(np.float64(scale) * backoff)
        if lo is not None:
            scale = max(scale, np.float32(lo))
        return scale, 0
    successful = tracker + 1
    if successful == interval:
        grown = np.float32(np.float64(scale) * growth)
        if np.isfinite(grown):
            scale = grown
        if hi is not None:
            scale = min(scale, np.float32(hi))
        return scale, 0
    return scale, successful


def expected_sequence(steps, bad_steps, init, growth, backoff, interval, lo=None, hi=None):
    """Per step: (scale used, skipped, scale after, tracker after)."""
    seq, scale, tracker = [], np.float32(init), 0
    for step in range(1, steps + 1):
        found = step in bad_steps
        new_scale, tracker = update_scale(scale, tracker, found, growth, backoff, interval, lo, hi)
        seq.append((float(scale), found, float(new_scale), tracker))
        scale = new_scale
    return seq


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)
    return r.stdout


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def checkpoint_state(path):
    """Every initializer of the checkpoint (main graph and training step), by name."""
    m = onnx.load(path)
    state = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for info in m.training_info:
        state.update({t.name: numpy_helper.to_array(t) for t in info.algorithm.initializer})
    return state


def poisoned_data(models_dir, out, steps, bad_steps):
    d = np.load(os.path.join(models_dir, "data", "digits.npz"))
    x, y = d["x"][: steps * BATCH].copy(), d["y"][: steps * BATCH].copy()
    for i, step in enumerate(sorted(bad_steps)):
        x[(step - 1) * BATCH + 5, 3] = np.inf if i % 2 else np.nan
    path = os.path.join(out, "poisoned.npz")
    np.savez(path, x=x, y=y)
    return path


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def scaler_parity(args, name, steps, bad_steps, options, init, growth, backoff, interval,
                  lo=None, hi=None):
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    data = poisoned_data(args.models_dir, out, steps, bad_steps)
    model = os.path.join(args.models_dir, "mlp.onnx")
    plan = os.path.join(out, "mlp.plan")
    run([args.ampc, "compile", model, "--train", "--optimizer", "adam", "--lr", "1e-3",
         "-o", plan] + options)
    expected = expected_sequence(steps, bad_steps, init, growth, backoff, interval, lo, hi)

    # One uninterrupted run with its log.
    log = os.path.join(out, "whole.jsonl")
    whole = os.path.join(out, "whole.onnx")
    summary = run([args.ampc, "train", plan, "--data", data, "--steps", str(steps), "--log", log,
                   "--checkpoint", whole])
    got = [(e["scale"], e["skipped"]) for e in read_log(log)]
    print(f"{name}: step  scale_used  skipped  scale_after  growth_tracker")
    for step, (want, have) in enumerate(zip(expected, got), 1):
        print(f"{name}: {step:4d} {want[0]:11g} {str(want[1]):>8} {want[2]:12g} {want[3]:15d}"
              + ("" if (want[0], want[1]) == have else f"   ampc: {have}"))
    if got != [(e[0], e[1]) for e in expected]:
        sys.exit(f"{name}: the log's scale/skipped sequence differs from torch's rule")
    final = expected[-1][2]
    if f"{len(bad_steps)} of {steps} steps skipped" not in summary or f"final scale {final:g}" not in summary:
        sys.exit(f"{name}: the summary does not report the skipped steps and final scale:\n{summary}")

    # Step by step: each step a resumed run writing a checkpoint.
    previous, ckpt = None, None
    for step in range(1, steps + 1):
        ckpt = os.path.join(out, f"step{step}.onnx")
        cmd = [args.ampc, "train", plan, "--data", data, "--steps", "1", "--checkpoint", ckpt]
        if previous:
            cmd += ["--resume", previous]
        run(cmd)
        state = checkpoint_state(ckpt)
        want = expected[step - 1]
        have = (float(state["amp.scale"]), int(state["amp.growth_tracker"]))
        if have != (want[2], want[3]) or state["amp.growth_tracker"].dtype != np.int32:
            sys.exit(f"{name}: after step {step} the checkpoint holds scale/growth_tracker {have}, "
                     f"torch's rule gives {(want[2], want[3])}")
        if step in bad_steps:
            before = checkpoint_state(previous) if previous else None
            for k, v in state.items():
                if k.startswith("amp.") or before is None:
                    continue
                if not same_bits(v, before[k]):
                    sys.exit(f"{name}: step {step} was skipped but '{k}' changed")
        previous = ckpt
    a, b = checkpoint_state(ckpt), checkpoint_state(whole)
    for k in b:
        if not same_bits(a[k], b[k]):
            sys.exit(f"{name}: '{k}' after {steps} resumed single steps differs from one run")
    print(f"{name}: ok ({len(bad_steps)} skipped steps, final scale {final:g})")


def clip_parity(args, max_norm=0.5, steps=3, lr=0.1):
    out = os.path.join(args.out, "clip")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(args.models_dir, "mlp.onnx")
    d = np.load(os.path.join(args.models_dir, "data", "digits.npz"))
    log, ckpt = os.path.join(out, "clip.jsonl"), os.path.join(out, "clip.onnx")
    run([args.ampc, "train", model, "--data", os.path.join(args.models_dir, "data", "digits.npz"),
         "--steps", str(steps), "--optimizer", "sgd", "--lr", str(lr), "--clip-grad-norm",
         str(max_norm), "--log", log, "--checkpoint", ckpt])
    # PyTorch, float32: the functional mlp of torch_forward_oracle.py, SGD, clip_grad_norm_.
    p = fwd.params(fwd.initializers(model), torch.float32)
    trainable = {k: v.requires_grad_() for k, v in p.items() if v.is_floating_point()}
    opt = torch.optim.SGD(list(trainable.values()), lr=lr)
    norms = []
    for s in range(steps):
        x = torch.from_numpy(np.ascontiguousarray(d["x"][s * BATCH:(s + 1) * BATCH]))
        y = torch.from_numpy(np.ascontiguousarray(d["y"][s * BATCH:(s + 1) * BATCH]))
        opt.zero_grad()
        fwd.LOSS["mlp"](p, x, y).backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(
            [v for v in trainable.values() if v.grad is not None], max_norm)))
        opt.step()
    logged = [e["grad_norm"] for e in read_log(log)]
    worst = 0.0
    for s, (have, want) in enumerate(zip(logged, norms), 1):
        err = abs(have - want) / want
        worst = max(worst, err)
        print(f"clip: step {s} grad_norm ampc {have:.8g} torch {want:.8g} rel.err {err:.2e}")
        if want <= max_norm:
            sys.exit("clip: the test does not clip; lower max_norm")
    state = checkpoint_state(ckpt)
    initial = fwd.initializers(model)
    for k, v in trainable.items():
        if v.grad is None:
            continue
        want = v.detach().numpy().astype(np.float64) - initial[k].astype(np.float64)
        have = state[k].astype(np.float64) - initial[k].astype(np.float64)
        err = np.linalg.norm(have - want) / np.linalg.norm(want)
        worst = max(worst, err)
        print(f"clip: {k} update rel.err {err:.2e}")
    if worst > 1e-5:
        sys.exit(f"clip: relative error {worst:.2e} above 1e-5")
    print(f"clip: ok (worst relative error {worst:.2e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    scaler_parity(args, "dynamic", 16, {3, 4, 8, 13},
                  ["--loss-scale", "dynamic", "--growth-interval", "3"],
                  65536.0, 2.0, 0.5, 3)
    scaler_parity(args, "bounded", 14, {2, 3, 4, 11},
                  ["--loss-scale", "dynamic", "--init-scale", "1024", "--growth-interval", "2",
                   "--min-scale", "300", "--max-scale", "2048", "--backoff-factor", "0.25"],
                  1024.0, 2.0, 0.25, 2, lo=300.0, hi=2048.0)
    clip_parity(args)


if __name__ == "__main__":
    main()
