#!/usr/bin/env python3
"""fp32 training step time, ampc (CPU) vs PyTorch eager, same model, batch, optimizer and
thread count, measured in one run. A benchmark: prints a table, passes or fails nothing.

    /usr/bin/python3 scripts/bench_train.py [--ampc build/tools/ampc/ampc] [--threads 2] [--steps 300]

Like bench_forward.py it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for both sides, in
its own process and its children only.
"""
import os
import subprocess
import time

from bench_common import ROOT, arg_parser, thread_env  # first: sets the environment

import numpy as np
import torch

import export_models

# name: (data file, input names, batch, learning rate)
CASES = {
    "mlp": ("digits.npz", ("x", "y"), 32, 1e-3),
    "cnn": ("digits_images.npz", ("x", "y"), 32, 3e-3),
    "gpt": ("seqtask.npz", ("tokens", "targets"), 8, 3e-3),
}


def torch_steps_per_s(name, steps, threads):
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

    for k in range(20):
        step(k)
    start = time.perf_counter()
    for k in range(steps):
        last = step(k)
    return steps / (time.perf_counter() - start), last


def ampc_steps_per_s(ampc, name, steps, threads):
    data_file, _, _, lr = CASES[name]
    env = thread_env(threads)
    cmd = [ampc, "train", os.path.join(ROOT, "models", name + ".onnx"), "--data",
           os.path.join(ROOT, "models", "data", data_file), "--steps", str(steps), "--optimizer", "adam",
           "--lr", str(lr), "--log-every", "1"]
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start  # includes compiling the training plan
    loss = float(out.stderr.split("loss")[-1].split()[0])  # the last step's line
    return steps / elapsed, loss


def main():
    p = arg_parser(__doc__, threads=2)
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    print(f"OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset for both sides; {args.threads} threads; "
          f"{args.steps} Adam steps after 20 warm-up steps (torch); ampc's time includes compiling; "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    print("| model | batch | ampc steps/s | torch steps/s | ampc/torch | ampc last loss | torch last loss |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in CASES:
        a, al = ampc_steps_per_s(args.ampc, name, args.steps, args.threads)
        t, tl = torch_steps_per_s(name, args.steps, args.threads)
        print(f"| {name} | {CASES[name][2]} | {a:.0f} | {t:.0f} | {a / t:.2f} | {al:.3f} | {tl:.3f} |")


if __name__ == "__main__":
    main()
