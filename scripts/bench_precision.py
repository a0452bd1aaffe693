#!/usr/bin/env python3
"""Mixed precision on the CPU backend: the example models trained in fp32, fp16 (dynamic loss
scaling) and bf16 with the same data, steps and optimizer; final loss, held-out result,
skipped steps, final scale and step time. A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_precision.py [--ampc build/tools/ampc/ampc] [--threads 1]

fp16 and bf16 are *emulated* here (16-bit storage, fp32 math, one rounding per stored value),
so they are slower than fp32 on the CPU; the point is the numerics, which the CUDA backend
reproduces. Like the other benchmarks it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in its
own process and children only.
"""
import os
import re
import subprocess
import tempfile

from bench_common import (ROOT, arg_parser, mean_step_ms, print_row, print_table_header, read_log,
                          thread_env)

# name: (data file, batch of the committed model, steps, optimizer options)
CASES = {
    "mlp": ("digits.npz", 32, 600, ["--optimizer", "adam", "--lr", "1e-3"]),
    "cnn": ("digits_images.npz", 32, 300, ["--optimizer", "adam", "--lr", "3e-3"]),
    "gpt": ("seqtask.npz", 8, 600, ["--optimizer", "adam", "--lr", "3e-3"]),
}


def train(ampc, name, precision, threads, tmp):
    data, batch, steps, opts = CASES[name]
    log = os.path.join(tmp, f"{name}.{precision}.jsonl")
    cmd = [ampc, "train", os.path.join(ROOT, "models", name + ".onnx"), "--data",
           os.path.join(ROOT, "models", "data", data), "--holdout", "0.1", "--steps", str(steps),
           "--shuffle", "--seed", "1", "--precision", precision, "--log", log,
           "--log-every", str(steps)] + opts
    out = subprocess.run(cmd, env=thread_env(threads), capture_output=True, text=True,
                         check=True).stdout
    lines = read_log(log)
    last = sum(l["loss"] for l in lines[-20:]) / 20
    step_ms = mean_step_ms(lines[10:], batch)
    held = re.search(r"held-out: \d+ samples: loss ([0-9.]+)(?:, accuracy ([0-9.]+)%)?", out)
    skipped = re.search(r"(\d+) of \d+ steps skipped", out)
    scale = re.search(r"final scale (\S+)", out)
    return {"first": lines[0]["loss"], "last": last, "held_loss": float(held.group(1)),
            "held_acc": held.group(2) or "-", "skipped": skipped.group(1) if skipped else "-",
            "scale": scale.group(1) if scale else "-", "batch_ms": step_ms}


def main():
    p = arg_parser(__doc__, threads=1)
    args = p.parse_args()
    print(f"{args.threads} thread(s), OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; "
          "loss = mean of the last 20 steps; held-out = last 10% of the data; step time = mean "
          "over steps 11.. (from the log's samples_per_s)")
    print_table_header("model", "precision", "first loss", "last loss", "held-out loss",
                       "held-out acc %", "skipped", "final scale", "ms / step")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            for precision in ("fp32", "fp16", "bf16"):
                r = train(args.ampc, name, precision, args.threads, tmp)
                print_row(name, precision, f"{r['first']:.4f}", f"{r['last']:.4f}",
                          f"{r['held_loss']:.4f}", r["held_acc"], r["skipped"], r["scale"],
                          f"{r['batch_ms']:.4f}")


if __name__ == "__main__":
    main()
