#!/usr/bin/env python3
"""CPU training step time of fused against unfused plans: each example model in fp32, fp16
and bf16 (Adam; fp16 with dynamic loss scaling), compiled with and without fusion
(`--no-fusion`) for `--target cpu`, trained for the same steps on the same data; also the
kernel counts of both plans. A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_fused_step.py [--ampc build/tools/ampc/ampc] [--threads 1]

Like the other benchmarks it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in its own
process and children only. Step time = mean over steps 21.. (the log's samples_per_s).
"""
import json
import os
import re
import subprocess
import tempfile

from bench_common import (ROOT, arg_parser, mean_step_ms, print_row, print_table_header, read_log,
                          thread_env)

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
    subprocess.run(cmd, env=thread_env(threads), capture_output=True, text=True, check=True)
    return mean_step_ms(read_log(log)[20:], batch)


def main():
    p = arg_parser(__doc__, threads=1)
    args = p.parse_args()
    print(f"{args.threads} thread(s); ms per training step (CPU backend), kernels per step")
    print_table_header("model", "precision", "kernels unfused", "kernels fused", "ms unfused",
                       "ms fused", "speed-up")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            for precision in ("fp32", "fp16", "bf16"):
                r = {}
                for fused in (False, True):
                    plan = os.path.join(tmp, f"{name}.{precision}.{fused}.plan")
                    kernels = compile_plan(args.ampc, name, precision, fused, plan)
                    ms = step_ms(args.ampc, name, plan, args.threads, plan + ".jsonl")
                    r[fused] = (kernels, ms)
                print_row(name, precision, r[False][0], r[True][0], f"{r[False][1]:.3f}",
                          f"{r[True][1]:.3f}", f"{r[False][1] / r[True][1]:.2f}x")


if __name__ == "__main__":
    main()
