#!/usr/bin/env python3
"""CPU training step time of fused against unfused plans: each example model in fp32, fp16
and bf16 (Adam; fp16 with dynamic loss scaling), compiled with and without fusion
(`--no-fusion`) for `--target cpu`, trained for the same steps on the same data; also the
kernel counts of both plans. A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_fused_step.py [--ampc build/tools/ampc/ampc] [--threads 1]

Like the other benchmarks it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in its own
process and children only. Step time = mean over steps 21.. (the log's samples_per_s).
"""
import argparse
import json
import os
import re
import subprocess
import tempfile

for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(var, None)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: (data file, batch of the committed model, steps)
CASES = {"mlp": ("digits.npz", 32, 300), "cnn": ("digits_images.npz", 32, 150),
         "gpt": ("seqtask.npz", 8, 150)}


def compile_plan(ampc, name, precision, fused, plan):
    cmd = [ampc, "compile", os.path.join(ROOT, "models", name + ".onnx"), "-o", plan, "--train",
           "--optimizer", "adam", "--precision", precision, "--target", "cpu"]
    if not fused:
        cmd.append("--no-fusion")
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    out = subprocess.run([ampc, "inspect", plan, "--format", "json"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["kernels"]


def step_ms(ampc, name, plan, threads, log):
    data, batch, steps = CASES[name]
    cmd = [ampc, "train", plan, "--data", os.path.join(ROOT, "models", "data", data), "--steps",
           str(steps), "--log", log, "--log-every", "1"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    lines = [json.loads(l) for l in open(log)][20:]
    return 1000 * sum(batch / l["samples_per_s"] for l in lines) / len(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ampc", default=os.path.join(ROOT, "build", "tools", "ampc", "ampc"))
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    print(f"{args.threads} thread(s); ms per training step (CPU backend), kernels per step")
    print("| model | precision | kernels unfused | kernels fused | ms unfused | ms fused | "
          "speed-up |")
    print("|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            for precision in ("fp32", "fp16", "bf16"):
                r = {}
                for fused in (False, True):
                    plan = os.path.join(tmp, f"{name}.{precision}.{fused}.plan")
                    kernels = compile_plan(args.ampc, name, precision, fused, plan)
                    ms = step_ms(args.ampc, name, plan, args.threads, plan + ".jsonl")
                    r[fused] = (kernels, ms)
                print(f"| {name} | {precision} | {r[False][0]} | {r[True][0]} | "
                      f"{r[False][1]:.3f} | {r[True][1]:.3f} | {r[False][1] / r[True][1]:.2f}x |")


if __name__ == "__main__":
    main()
