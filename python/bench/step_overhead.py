#!/usr/bin/python3
"""Per-step overhead of the Python API over the command line's loop (a benchmark, not a test).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/step_overhead.py [--steps 2000] [--rounds 3]

Compiles models/mlp.onnx for training (fp16, Adam: the demo's plan) once with `ampc compile`,
then alternates, `--rounds` times: `ampc train PLAN --steps N` on the digits (its own timing
of the loop, "trained N steps in S s") and N `Trainer.step()` calls on the same plan with the
same batches (contiguous numpy arrays made beforehand). Prints each round and the best
(lowest) per-step times, whose difference is the Python call's overhead, and the load average,
since other processes on the machine slow both.
"""

import argparse
import os
import re
import subprocess
import tempfile
import time

import numpy as np

import ampc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
AMPC = os.environ.get("AMPC_BIN", os.path.join(ROOT, "build", "tools", "ampc", "ampc"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ampc-bench-") as d:
        plan = os.path.join(d, "mlp.train.plan")
        subprocess.run([AMPC, "compile", os.path.join(ROOT, "models", "mlp.onnx"), "--train",
                        "--precision", "fp16", "--optimizer", "adam", "--lr", "1e-3", "-o", plan],
                       check=True, capture_output=True)
        data = np.load(os.path.join(ROOT, "models", "data", "digits.npz"))
        x, y = data["x"].astype(np.float32), data["y"].astype(np.int64)
        per_epoch = len(x) // 32
        feeds = [(np.ascontiguousarray(x[k * 32:(k + 1) * 32]), np.ascontiguousarray(y[k * 32:(k + 1) * 32]))
                 for k in range(per_epoch)]
        cli_times, py_times = [], []
        for r in range(args.rounds):
            out = subprocess.run([AMPC, "train", plan, "--data", os.path.join(ROOT, "models", "data", "digits.npz"),
                                  "--steps", str(args.steps)], check=True, capture_output=True, text=True).stdout
            seconds = float(re.search(r"trained \d+ steps in ([0-9.]+) s", out).group(1))
            cli_times.append(seconds / args.steps)
            trainer = ampc.compile(plan)
            for k in range(10):  # warm-up, as the CLI's first steps
                trainer.step(x=feeds[k][0], y=feeds[k][1])
            start = time.perf_counter()
            for k in range(args.steps):
                bx, by = feeds[k % per_epoch]
                trainer.step(x=bx, y=by)
            py_times.append((time.perf_counter() - start) / args.steps)
            print(f"round {r + 1}: ampc train {1e6 * cli_times[-1]:.1f} us/step, "
                  f"Trainer.step() {1e6 * py_times[-1]:.1f} us/step")
    cli, py = min(cli_times), min(py_times)
    print(f"best of {args.rounds} ({args.steps} steps each): ampc train {1e6 * cli:.1f} us/step, "
          f"Trainer.step() {1e6 * py:.1f} us/step, overhead {1e6 * (py - cli):+.1f} us/step "
          f"({100 * (py - cli) / cli:+.1f}%)")
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
