"""One zoo model through ampc (a ctest test per model, label `zoo`):

  1. export (zoo_export.py), cached under WORK/export-<hash of the zoo scripts>/MODEL
  2. step-1 gradients (zoo_gradients) against PyTorch float64: the norm-wise error
     ||ampc - torch64|| / ||torch64|| over all parameters must be at most
     max(3 x PyTorch float32's own error, 1e-5); where it is not, the same bound against
     torch64 with activations that lie within float32's noise of a kink (ReLU, ReLU6, ...,
     max-pooling near-ties) taken to the other side, the set that fits best (zoo_kinks.py)
  3. `ampc compile --train --target cpu` in fp32, fp16 and bf16 (the compile time is recorded)
  4. 10 training steps in fp16 and in bf16 (dynamic loss scaling for fp16): every loss of a
     step that was not skipped is finite, the scale stays finite and positive, a skipped
     step halves the scale, and not every step is skipped. When every fp16 step skips because
     PyTorch's own float64 gradient times the scale is past fp16's range (inception_v3's
     BatchNorms over 4 values at 1x1 give weight gradients in the thousands), the run is
     repeated with as many more steps as halvings fp16 needs, and must then train

  5. `ampc compile --train --target cuda:sm_90 --precision bf16` (where ampc has the CUDA
     backend): the ops its warning says the CUDA backend would refuse at load (every step's
     builder and the device layout, checked without a GPU) must be the ones
     expected_cuda_refusals.txt lists for the model, none for a model it does not list

The result goes to WORK/results/MODEL.json (docs/models.md is made from these by
make_models_doc.py). A model listed in expected_refusals.txt passes when it fails (printed
as "refused: REASON"); when it unexpectedly passes, that is printed loudly.

Usage: run_zoo.py MODEL --ampc BIN --gradients BIN --work DIR
"""
import argparse
import hashlib
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
GRAD_FACTOR = 3.0
GRAD_FLOOR = 1e-5
STEPS = 10
INIT_SCALE = 65536.0
FP16_MAX = 65504.0


class Failure(Exception):
    pass


def script_hash():
    h = hashlib.sha256()
    for f in ("zoo_models.py", "zoo_export.py"):
        with open(os.path.join(HERE, f), "rb") as fp:
            h.update(fp.read())
    return h.hexdigest()[:12]


def listing(filename):
    """MODEL: text lines of a tests/zoo listing (comments and blank lines skipped)."""
    out = {}
    with open(os.path.join(HERE, filename)) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, rest = line.partition(":")
                out[name.strip()] = rest.strip()
    return out


def expected_refusals():
    return listing("expected_refusals.txt")


def run(cmd, what, timeout=600):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise Failure(f"{what}: cannot run {cmd[0]}: {e}")
    elapsed = time.monotonic() - t0
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        err = next((ln for ln in lines if "error" in ln), lines[-1] if lines else "")
        raise Failure(f"{what}: {err.strip()}")
    return p.stdout, elapsed


def norm_error(got, want):
    num = sum(float(np.sum((got[k].astype(np.float64) - want[k]) ** 2)) for k in want)
    den = sum(float(np.sum(want[k] ** 2)) for k in want)
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def load_dir(d):
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}


def gradient_check(args, src, out, result):
    gdir = os.path.join(out, "grads")
    shutil.rmtree(gdir, ignore_errors=True)  # a parameter gone since the last run is not ours
    run([args.gradients, os.path.join(src, "model.onnx"), os.path.join(src, "batch"), gdir],
        "gradients")
    ours = load_dir(os.path.join(gdir, "grad"))
    t64 = load_dir(os.path.join(src, "grad64"))
    t32 = load_dir(os.path.join(src, "grad32"))
    missing = sorted(set(t64) - set(ours))
    extra = sorted(set(ours) - set(t64))
    if missing or extra:
        raise Failure(f"gradients: parameters differ from PyTorch's (missing {missing[:3]}, "
                      f"extra {extra[:3]})")
    for k in t64:
        if ours[k].shape != t64[k].shape:
            raise Failure(f"gradient of {k}: shape {ours[k].shape}, PyTorch {t64[k].shape}")
    err = norm_error(ours, t64)
    err32 = norm_error(t32, t64)
    result["grad_error"] = err
    result["torch32_error"] = err32
    result["grad_ratio"] = err / err32 if err32 > 0 else float("inf")
    bound = max(GRAD_FACTOR * err32, GRAD_FLOOR)
    # The worst parameters, to say where the error comes from when the check fails.
    per = sorted(((norm_error({k: ours[k]}, {k: t64[k]}), k) for k in t64), reverse=True)
    result["worst_parameters"] = [[k, e] for e, k in per[:3]]
    if math.isfinite(err) and err > bound:
        # An activation within float32's noise of a ReLU-like kink or a max-pooling near-tie
        # takes either side in any float32 implementation (zoo_kinks.py): the same standard
        # against float64 with the float32-plausible sides that fit ampc best.
        import zoo_kinks  # torch: only here, where the plain check failed
        try:
            kink_err, flips = zoo_kinks.explain(args.model, ours, t64)
        except Exception as e:  # noqa: BLE001 - reported with the failure below
            kink_err, flips = None, []
            per[0] = (per[0][0], f"{per[0][1]} (kink search failed: {type(e).__name__}: {e})")
        if kink_err is not None and kink_err <= bound:
            result["grad_error_plain"] = err
            result["grad_error"] = kink_err
            result["grad_ratio"] = kink_err / err32 if err32 > 0 else float("inf")
            result["kink_flips"] = flips
            return
    if not math.isfinite(err) or err > bound:
        raise Failure(f"step-1 gradient error {err:.3g} > {bound:.3g} (PyTorch float32: "
                      f"{err32:.3g}); worst: {per[0][1]} {per[0][0]:.3g}")


def plan_facts(ampc, plan):
    out, _ = run([ampc, "inspect", plan, "--format", "json"], "inspect")
    j = json.loads(out)
    mem = j.get("memory", j)
    return {"arena_bytes": mem.get("arena_bytes")}


def compile_all(args, src, out, result):
    for precision in ("fp32", "fp16", "bf16"):
        plan = os.path.join(out, precision + ".plan")
        # For the CPU, which trains it below (as `ampc train model.onnx` compiles on the CPU).
        cmd = [args.ampc, "compile", os.path.join(src, "model.onnx"), "--train", "--optimizer",
               "sgd", "--lr", "0.01", "--target", "cpu", "-o", plan]
        if precision != "fp32":
            cmd += ["--precision", precision]
        _, seconds = run(cmd, f"compile {precision}")
        result[f"compile_s_{precision}"] = round(seconds, 2)
        result[f"plan_{precision}"] = plan_facts(args.ampc, plan)
        if precision == "fp16":
            rep, _ = run([args.ampc, "inspect", os.path.join(src, "model.onnx"),
                          "--precision-report", "--precision", "fp16", "--format", "json"],
                         "precision report")
            r = json.loads(rep)
            result["casts_fp16"] = len(r.get("casts", []))


def expected_cuda_refusals():
    return {name: sorted(o.strip() for o in ops.split(",") if o.strip())
            for name, ops in listing("expected_cuda_refusals.txt").items()}


def cuda_check(args, src, out, result):
    ops_line, _ = run([args.ampc, "ops", "--op", "Relu"], "ops")
    if "generated" not in ops_line:
        result["cuda_refused_ops"] = "ampc has no CUDA backend"
        return
    plan = os.path.join(out, "cuda_bf16.plan")
    p = subprocess.run([args.ampc, "compile", os.path.join(src, "model.onnx"), "--train",
                        "--optimizer", "sgd", "--lr", "0.01", "--target", "cuda:sm_90",
                        "--precision", "bf16", "-o", plan], capture_output=True, text=True)
    if p.returncode != 0:
        raise Failure("compile for cuda:sm_90: " + p.stderr.strip())
    # The warning names each refused op with its first node: "Op (node '...')".
    got = sorted(set(re.findall(r"([A-Za-z.]+) \(node '", p.stderr)))
    want = expected_cuda_refusals().get(args.model, [])
    result["cuda_refused_ops"] = got
    if got != want:
        raise Failure(f"the CUDA backend would refuse {got or 'nothing'}, expected "
                      f"{want or 'nothing'} (tests/zoo/expected_cuda_refusals.txt): "
                      + p.stderr.strip())


def train(args, src, out, result, precision, steps_to_run=STEPS):
    log = os.path.join(out, precision + ".jsonl")
    run([args.ampc, "train", os.path.join(out, precision + ".plan"), "--data",
         os.path.join(src, "data.npz"), "--steps", str(steps_to_run), "--log", log],
        f"train {precision}")
    with open(log) as f:
        steps = [json.loads(ln) for ln in f if ln.strip()]
    if len(steps) != steps_to_run:
        raise Failure(f"train {precision}: {len(steps)} log lines, not {steps_to_run}")
    skipped = sum(1 for s in steps if s.get("skipped"))
    for s in steps:
        if not s.get("skipped") and not math.isfinite(float(s["loss"])):
            raise Failure(f"train {precision}: step {s['step']} loss {s['loss']}")
        scale = s.get("scale")
        if scale is not None and not (math.isfinite(float(scale)) and float(scale) > 0):
            raise Failure(f"train {precision}: step {s['step']} scale {scale}")
    # Dynamic scaling: a skipped step (fp16 overflow at the scale it used) halves the scale
    # the next step uses; and the run must get past its overflows to train at all.
    for a, b in zip(steps, steps[1:]):
        if a.get("skipped") and a.get("scale") and float(b["scale"]) != float(a["scale"]) / 2:
            raise Failure(f"train {precision}: step {a['step']} skipped at scale {a['scale']} "
                          f"but the next step used {b['scale']}")
    if skipped == len(steps):
        halvings = genuine_overflow_halvings(src, steps[-1].get("scale"))
        if precision != "fp16" or steps_to_run != STEPS or halvings is None:
            raise Failure(f"train {precision}: every one of {len(steps)} steps skipped")
        # PyTorch's own float64 gradient is out of fp16's range at every scale these steps
        # used, so GradScaler would skip them too: train past the halvings fp16 needs.
        result["fp16_overflow_halvings"] = halvings
        return train(args, src, out, result, precision, halvings + STEPS)
    result[f"train_{precision}"] = {"first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"],
                                    "steps": len(steps), "skipped": skipped,
                                    "final_scale": steps[-1].get("scale")}


def genuine_overflow_halvings(src, scale):
    """How many halvings of the initial scale (65536) fp16 needs before PyTorch's float64
    step-1 gradient fits it, when that gradient times `scale` (the last scale used) still
    overflows fp16's largest finite value; None when it fits (the skips are ampc's)."""
    largest = max(float(np.abs(g).max()) for g in load_dir(os.path.join(src, "grad64")).values())
    if not scale or largest * float(scale) <= FP16_MAX:
        return None
    return math.ceil(math.log2(INIT_SCALE * largest / FP16_MAX))


def check(args, result):
    cache = os.path.join(args.work, "export-" + script_hash(), args.model)
    if not os.path.exists(os.path.join(cache, "meta.json")):
        run([PYTHON, os.path.join(HERE, "zoo_export.py"), args.model, cache], "export",
            timeout=900)
    with open(os.path.join(cache, "meta.json")) as f:
        meta = json.load(f)
    result["parameters"] = meta["parameters"]
    if "export_error" in meta:
        result["status"] = "not exportable"
        result["reason"] = "torch 1.13 cannot export it: " + meta["export_error"]
        return
    import onnx
    m = onnx.load(os.path.join(cache, "model.onnx"), load_external_data=False)
    result["onnx_ops"] = sorted({n.op_type for n in m.graph.node})
    out = os.path.join(args.work, "run", args.model)
    os.makedirs(out, exist_ok=True)
    gradient_check(args, cache, out, result)
    compile_all(args, cache, out, result)
    cuda_check(args, cache, out, result)
    train(args, cache, out, result, "fp16")
    train(args, cache, out, result, "bf16")
    result["status"] = "pass"


def export_all(work):
    """Exports every model (the ctest fixture before the per-model tests), two at a time."""
    parent = os.path.join(work, "export-" + script_hash())
    procs = [subprocess.Popen([PYTHON, os.path.join(HERE, "zoo_export.py"), "--all", parent,
                               str(k), "2"]) for k in range(2)]
    return max(p.wait() for p in procs)


def main():
    if sys.argv[1] == "--export-all":
        return export_all(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--gradients", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    refusals = expected_refusals()
    result = {"model": args.model}
    t0 = time.monotonic()
    try:
        check(args, result)
    except Failure as e:
        result["status"] = "fail"
        result["reason"] = str(e)
    except subprocess.TimeoutExpired as e:
        result["status"] = "fail"
        result["reason"] = f"timed out: {' '.join(e.cmd[:2])}"
    result["seconds"] = round(time.monotonic() - t0, 1)
    # CPU seconds of everything this test ran: what the test costs on an unshared machine.
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_seconds"] = round(children.ru_utime + children.ru_stime, 1)
    expected = refusals.get(args.model)
    if result["status"] == "fail" and expected:
        result["status"] = "refused"
        result["expected_reason"] = expected
    os.makedirs(os.path.join(args.work, "results"), exist_ok=True)
    with open(os.path.join(args.work, "results", args.model + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    if result["status"] == "refused":
        print(f"{args.model}: refused: {expected} (ampc says: {result['reason']})")
        return 0
    if expected and result["status"] == "pass":
        print(f"!!! {args.model}: UNEXPECTED PASS: it is listed in tests/zoo/expected_refusals.txt "
              f"('{expected}') but now passes; remove that line !!!")
        return 0
    if result["status"] == "not exportable":
        print(f"{args.model}: {result['reason']}")
        return 0
    if result["status"] != "pass":
        print(f"{args.model}: FAIL: {result['reason']}")
        return 1
    kinks = (f"; {len(result['kink_flips'])} kink(s) within float32's noise on the other side "
             f"from float64, {result['grad_error_plain']:.3g} without them"
             if "kink_flips" in result else "")
    print(f"{args.model}: pass (gradient error {result['grad_error']:.3g}, PyTorch float32 "
          f"{result['torch32_error']:.3g}{kinks})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
