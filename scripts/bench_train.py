#!/usr/bin/env python3
"""fp32 training step time, ampc (CPU) vs PyTorch eager, same model, batch, optimizer (Adam)
and thread count, measured in one run. A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_train.py [--ampc build/tools/ampc/ampc] [--threads 2]
        [--steps 300] [--rounds 3]

Both sides train models/NAME.onnx's model on its data set (models/data/) for 20 warm-up steps
and then --steps timed ones. PyTorch's steps are timed by a clock around its loop; ampc's come
from its own per-step log (`ampc train --log`: each step's samples/s), so compiling the ONNX
model into a training plan, loading it and starting the process are not part of its step time:
they are the "ampc start-up" column (the process's wall time minus its steps), a cost paid once
per run. The two sides take turns --rounds times; each column is the median of its rounds and
the ratio the median of the rounds' ratios (the shared cores' speed drifts over minutes).

Like bench_forward.py it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for both sides, in
its own process and its children only.
"""
import os
import statistics
import subprocess
import tempfile
import time

from bench_common import ROOT, arg_parser, read_log, thread_env  # first: sets the environment

import numpy as np
import torch

import export_models

WARMUP = 20

# name: (data file, input names, batch, learning rate)
CASES = {
    "mlp": ("digits.npz", ("x", "y"), 32, 1e-3),
    "cnn": ("digits_images.npz", ("x", "y"), 32, 3e-3),
    "gpt": ("seqtask.npz", ("tokens", "targets"), 8, 3e-3),
}


def torch_run(name, steps, threads):
    """(steps/s of the timed steps, last loss)."""
    data_file, names, batch, lr = CASES[name]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = export_models.build(name).train()
    data = np.load(os.path.join(ROOT, "models", "data", data_file))
    arrays = [torch.from_numpy(data[n]) for n in names]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = arrays[0].shape[0] // batch

    def step(k):
        j = k % n
        loss = model(*[a[j * batch:(j + 1) * batch] for a in arrays])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for k in range(WARMUP):
        step(k)
    start = time.perf_counter()
    for k in range(WARMUP, WARMUP + steps):
        last = step(k)
    return steps / (time.perf_counter() - start), last


def ampc_run(ampc, name, steps, threads, folder):
    """(steps/s of the timed steps, start-up s, last loss): `ampc train` of the ONNX model for
    WARMUP + steps steps, its steps timed by its own log."""
    data_file, _, batch, lr = CASES[name]
    log = os.path.join(folder, name + ".jsonl")
    cmd = [ampc, "train", os.path.join(ROOT, "models", name + ".onnx"), "--data",
           os.path.join(ROOT, "models", "data", data_file), "--steps", str(WARMUP + steps),
           "--optimizer", "adam", "--lr", str(lr), "--log", log]
    start = time.perf_counter()
    subprocess.run(cmd, env=thread_env(threads), capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    lines = read_log(log)
    step_s = [batch / line["samples_per_s"] for line in lines]
    timed = sum(step_s[WARMUP:])
    return steps / timed, wall - sum(step_s), lines[-1]["loss"]


def main():
    p = arg_parser(__doc__, threads=2)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for both sides; {args.threads} threads; "
          f"{args.steps} Adam steps after {WARMUP} warm-up steps, both sides; "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; {args.rounds} rounds, the sides "
          f"in turns: medians (load average before: {load})")
    print("| model | batch | ampc steps/s | torch steps/s | ampc/torch | ampc start-up s "
          "| ampc last loss | torch last loss |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name in CASES:
            runs = []
            for _ in range(args.rounds):
                a, up, al = ampc_run(args.ampc, name, args.steps, args.threads, folder)
                t, tl = torch_run(name, args.steps, args.threads)
                runs.append((a, t, up))
            a, t, up = (statistics.median(r[i] for r in runs) for i in range(3))
            ratio = statistics.median(r[0] / r[1] for r in runs)
            print(f"| {name} | {CASES[name][2]} | {a:.0f} | {t:.0f} | {ratio:.2f} | {up:.2f} "
                  f"| {al:.3f} | {tl:.3f} |", flush=True)


if __name__ == "__main__":
    main()
