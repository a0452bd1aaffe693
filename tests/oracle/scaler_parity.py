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
4. --clip-grad-norm under dynamic loss scaling (fp32 and fp16) against GradScaler's recipe
   (scale, unscale_, clip_grad_norm_, step) done by hand: logged grad_norm and updates.
5. fp16 with an initial scale that overflows inside the backward: skipped steps keep every
   bit, and resume across them is bit-exact (parameters, moments, scale, growth tracker).

    /usr/bin/python3 tests/oracle/scaler_parity.py --ampc BIN --models-dir models --out DIR
        [--only SECTION ...]   (sections: see SECTIONS)
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
import amp_reference as amp  # noqa: E402
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

    check_resumed_chain(args, name, out, plan, data, steps, bad_steps,
                        [(e[2], e[3]) for e in expected], whole)
    print(f"{name}: ok ({len(bad_steps)} skipped steps, final scale {final:g})")


def check_resumed_chain(args, name, out, plan, data, steps, skipped, scaler_after, whole):
    """Runs the plan one step at a time, each a run resumed from the previous checkpoint:
    after step s the checkpoint's scale and growth tracker are scaler_after[s - 1], on a
    skipped step every other state bit (parameters, moments, step counter) is unchanged, and
    the last checkpoint equals the uninterrupted run's (`whole`) bit for bit."""
    previous, ckpt = None, None
    for step in range(1, steps + 1):
        ckpt = os.path.join(out, f"step{step}.onnx")
        cmd = [args.ampc, "train", plan, "--data", data, "--steps", "1", "--checkpoint", ckpt]
        if previous:
            cmd += ["--resume", previous]
        run(cmd)
        state = checkpoint_state(ckpt)
        want = scaler_after[step - 1]
        have = (float(state["amp.scale"]), int(state["amp.growth_tracker"]))
        if have != want or state["amp.growth_tracker"].dtype != np.int32:
            sys.exit(f"{name}: after step {step} the checkpoint holds scale/growth_tracker {have}, "
                     f"torch's rule gives {want}")
        if step in skipped:
            before = checkpoint_state(previous) if previous else fwd.initializers(
                os.path.join(args.models_dir, "mlp.onnx"))
            compared = 0
            for k, v in state.items():
                if k.startswith("amp.") or k not in before:
                    continue
                compared += 1
                if not same_bits(v, before[k]):
                    sys.exit(f"{name}: step {step} was skipped but '{k}' changed")
            if compared == 0:
                sys.exit(f"{name}: nothing compared on skipped step {step}")
        previous = ckpt
    a, b = checkpoint_state(ckpt), checkpoint_state(whole)
    if set(a) != set(b):
        sys.exit(f"{name}: the resumed and the uninterrupted checkpoints hold other state")
    for k in b:
        if not same_bits(a[k], b[k]):
            sys.exit(f"{name}: '{k}' after {steps} resumed single steps differs from one run")


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


def clip_scaled_parity(args, precision, max_norm=0.5, steps=3, lr=0.1):
    """--clip-grad-norm under dynamic loss scaling against GradScaler's recipe, done by hand
    (torch 1.13's GradScaler runs on CUDA only): backward from loss * scale, unscale_ (every
    gradient times fp32(1 / scale)), clip_grad_norm_ on the unscaled gradients, SGD step, the
    scale updated by torch's rule. fp32: the same float32 arithmetic as clip_parity, bound
    1e-5. fp16: against amp_reference.py's fp16 autocast by hand, bound 8u (u = 2^-11), as
    justified in sixteen_bit_oracle.py (mlp's chains are shorter than gpt's). Clipping the
    still-scaled gradients would log a norm 65536 times too large and clip them to
    max_norm / 65536 of the right update."""
    name = f"clip-scaled-{precision}"
    bound = 1e-5 if precision == "fp32" else 8 * 2.0 ** -11
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    model = os.path.join(args.models_dir, "mlp.onnx")
    data = os.path.join(args.models_dir, "data", "digits.npz")
    d = np.load(data)
    log, ckpt = os.path.join(out, "log.jsonl"), os.path.join(out, "ckpt.onnx")
    init = 65536.0
    run([args.ampc, "train", model, "--data", data, "--steps", str(steps), "--optimizer", "sgd",
         "--lr", str(lr), "--precision", precision, "--loss-scale", "dynamic",
         "--clip-grad-norm", str(max_norm), "--log", log, "--checkpoint", ckpt])
    p = fwd.params(fwd.initializers(model), torch.float32)
    trainable = {k: v.requires_grad_() for k, v in p.items() if v.is_floating_point()}
    opt = torch.optim.SGD(list(trainable.values()), lr=lr)
    scale, tracker, want_log = np.float32(init), 0, []
    for s in range(steps):
        x = torch.from_numpy(np.ascontiguousarray(d["x"][s * BATCH:(s + 1) * BATCH]))
        y = torch.from_numpy(np.ascontiguousarray(d["y"][s * BATCH:(s + 1) * BATCH]))
        _, found_inf = amp.scaled_step_gradients("mlp", p, trainable, [x, y],
                                                 precision, float(scale))
        norm = None
        if not found_inf:
            norm = float(torch.nn.utils.clip_grad_norm_(
                [v for v in trainable.values() if v.grad is not None], max_norm))
            opt.step()
        want_log.append((float(scale), found_inf, norm))
        scale, tracker = update_scale(scale, tracker, found_inf, 2.0, 0.5, 2000)
    logged = read_log(log)
    worst = 0.0
    for s, (entry, (want_scale, want_skip, want_norm)) in enumerate(zip(logged, want_log), 1):
        if (entry["scale"], entry["skipped"]) != (want_scale, want_skip) or want_skip:
            sys.exit(f"{name}: step {s} logs scale/skipped {(entry['scale'], entry['skipped'])}, "
                     f"the recipe gives {(want_scale, want_skip)} (the test needs no skip)")
        err = abs(entry["grad_norm"] - want_norm) / want_norm
        worst = max(worst, err)
        print(f"{name}: step {s} scale {want_scale:g} grad_norm ampc {entry['grad_norm']:.8g} "
              f"torch {want_norm:.8g} rel.err {err:.2e}")
        if want_norm <= max_norm:
            sys.exit(f"{name}: the test does not clip; lower max_norm")
    if len(logged) != steps:
        sys.exit(f"{name}: {len(logged)} log lines for {steps} steps")
    state = checkpoint_state(ckpt)
    initial = fwd.initializers(model)
    for k, v in trainable.items():
        if v.grad is None:
            continue
        want = v.detach().numpy().astype(np.float64) - initial[k].astype(np.float64)
        have = state[k].astype(np.float64) - initial[k].astype(np.float64)
        err = np.linalg.norm(have - want) / np.linalg.norm(want)
        worst = max(worst, err)
        print(f"{name}: {k} update rel.err {err:.2e}")
    if worst > bound:
        sys.exit(f"{name}: relative error {worst:.2e} above {bound:.2e}")
    print(f"{name}: ok (worst relative error {worst:.2e}, bound {bound:.2e})")


def backward_overflow(args, steps=8, init=2.0 ** 19, interval=2):
    """fp16, dynamic scaling, an initial scale so large that the scaled gradients overflow
    fp16 inside the backward (the data is the plain digits; the forward and its loss are
    finite): the steps that overflow are skipped with every parameter and Adam moment bit
    unchanged, the scale follows torch's rule over ampc's skipped flags, and a run resumed
    from a checkpoint before each step (a skipped one included) ends bit for bit where the
    uninterrupted run ends: parameters, moments, step counter, scale, growth tracker.
    That the overflow is the backward's is checked outside ampc: amp_reference.py's fp16
    backward at the initial parameters overflows at this scale and not at 2^16."""
    name = "backward-overflow"
    out = os.path.join(args.out, name)
    os.makedirs(out, exist_ok=True)
    model = os.path.join(args.models_dir, "mlp.onnx")
    data = os.path.join(args.models_dir, "data", "digits.npz")
    d = np.load(data)
    x = torch.from_numpy(np.ascontiguousarray(d["x"][:BATCH]))
    y = torch.from_numpy(np.ascontiguousarray(d["y"][:BATCH]))
    if not np.isfinite(d["x"][:steps * BATCH]).all():
        sys.exit(f"{name}: the data is not finite")
    p = fwd.params(fwd.initializers(model), torch.float32)
    trainable = {k: v.requires_grad_() for k, v in p.items() if v.is_floating_point()}
    loss, overflow = amp.scaled_step_gradients("mlp", p, trainable, [x, y], "fp16", init)
    _, overflow_default = amp.scaled_step_gradients("mlp", p, trainable, [x, y], "fp16", 65536.0)
    if not np.isfinite(loss) or not overflow or overflow_default:
        sys.exit(f"{name}: the fp16 reference should overflow in the backward at scale {init:g} "
                 f"(it does: {overflow}) and not at 65536 (it does: {overflow_default})")

    plan = os.path.join(out, "mlp.plan")
    run([args.ampc, "compile", model, "--train", "--optimizer", "adam", "--lr", "1e-3",
         "--precision", "fp16", "--loss-scale", "dynamic", "--init-scale", f"{init:g}",
         "--growth-interval", str(interval), "-o", plan])
    log, whole = os.path.join(out, "whole.jsonl"), os.path.join(out, "whole.onnx")
    run([args.ampc, "train", plan, "--data", data, "--steps", str(steps), "--log", log,
         "--checkpoint", whole])
    entries = read_log(log)
    skipped = {s for s, e in enumerate(entries, 1) if e["skipped"]}
    print(f"{name}: skipped steps {sorted(skipped)}, scales {[e['scale'] for e in entries]}")
    if 1 not in skipped or len(skipped) == steps:
        sys.exit(f"{name}: expected step 1 skipped and some steps applied")
    if not all(e["loss"] is not None and np.isfinite(e["loss"]) for e in entries):
        sys.exit(f"{name}: a loss is not finite: the overflow must come from the backward")
    expected = expected_sequence(steps, skipped, init, 2.0, 0.5, interval)
    if [e["scale"] for e in entries] != [e[0] for e in expected]:
        sys.exit(f"{name}: the logged scales differ from torch's rule {[e[0] for e in expected]}")
    check_resumed_chain(args, name, out, plan, data, steps, skipped,
                        [(e[2], e[3]) for e in expected], whole)
    print(f"{name}: ok ({len(skipped)} steps skipped by backward overflows, resume bit-exact)")


SECTIONS = ["dynamic", "bounded", "clip", "clip-scaled-fp32", "clip-scaled-fp16",
            "backward-overflow"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=SECTIONS, action="append",
                    help="run this section only (repeatable; default: all)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    only = set(args.only or SECTIONS)
    if "dynamic" in only:
        scaler_parity(args, "dynamic", 16, {3, 4, 8, 13},
                      ["--loss-scale", "dynamic", "--growth-interval", "3"],
                      65536.0, 2.0, 0.5, 3)
    if "bounded" in only:
        scaler_parity(args, "bounded", 14, {2, 3, 4, 11},
                      ["--loss-scale", "dynamic", "--init-scale", "1024", "--growth-interval",
                       "2", "--min-scale", "300", "--max-scale", "2048", "--backoff-factor",
                       "0.25"], 1024.0, 2.0, 0.25, 2, lo=300.0, hi=2048.0)
    if "clip" in only:
        clip_parity(args)
    for precision in ("fp32", "fp16"):
        if f"clip-scaled-{precision}" in only:
            clip_scaled_parity(args, precision)
    if "backward-overflow" in only:
        backward_overflow(args)


if __name__ == "__main__":
    main()
