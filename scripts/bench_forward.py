#!/usr/bin/env python3
"""Forward latency of the example models: ampc (CPU) vs PyTorch, same thread count.

Run with Debian's Python, which has torch and onnx, after building ampc:

    /usr/bin/python3 scripts/bench_forward.py [--ampc build/tools/ampc/ampc] [--threads 2]
        [--env OMP_WAIT_POLICY=passive]   # see docs/benchmarks.md

For each model and batch size the script exports the module at that batch
(models/export_models.py) into a temporary folder, times the PyTorch module's forward
(training mode, as exported, under torch.no_grad()) and `ampc bench` on the exported model,
both on the same inputs, and prints one table. Not a test: nothing passes or fails.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "models"))
# Machine-specific OpenBLAS overrides would make the two sides incomparable: this process
# and its children (ampc) run without them. The environment is settled in main() before
# torch, numpy and export_models are imported, since OpenBLAS and libgomp read it at load.
UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
np = torch = export_models = None  # imported in main()

TARGET_S = 2.0  # timed seconds per side and case, roughly (at least 20 iterations)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def quantiles(ms):
    q = statistics.quantiles(ms, n=10, method="inclusive")
    return statistics.median(ms), q[0], q[-1]


def iterations_for(seconds_per_iteration, lo, hi):
    return max(lo, min(hi, int(TARGET_S / max(seconds_per_iteration, 1e-6))))


def time_torch(module, inputs, warmup):
    with torch.no_grad():
        loss = module(*inputs)
        start = time.perf_counter()
        for _ in range(warmup):
            module(*inputs)
        n = iterations_for((time.perf_counter() - start) / max(warmup, 1), 20, 5000)
        ms = []
        for _ in range(n):
            start = time.perf_counter()
            module(*inputs)
            ms.append((time.perf_counter() - start) * 1e3)
    return float(loss), n, quantiles(ms)


def ampc(args, argv):
    """Runs ampc in this process's environment (see main) and returns its stdout."""
    out = subprocess.run([args.ampc] + argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join([args.ampc] + argv)} failed:\n{out.stderr}")
    return out.stdout


def time_ampc(args, model_path, feeds, warmup):
    base = ["bench", model_path, "--format", "json"]
    for name, path in feeds.items():
        base += ["--input", f"{name}={path}"]
    probe = json.loads(ampc(args, base + ["--warmup", "1", "--iterations", "5"]))
    n = iterations_for(probe["median_ms"] / 1e3, 20, 5000)
    r = json.loads(ampc(args, base + ["--warmup", str(warmup), "--iterations", str(n)]))
    return n, (r["median_ms"], r["p10_ms"], r["p90_ms"])


def ampc_loss(args, model_path, feeds, out_dir):
    argv = ["run", model_path, "--output-dir", out_dir]
    for name, path in feeds.items():
        argv += ["--input", f"{name}={path}"]
    ampc(args, argv)
    return float(np.load(os.path.join(out_dir, "loss.npy")))


def bench_case(args, name, batch, tmp):
    case_dir = os.path.join(tmp, f"{name}_b{batch}")
    os.makedirs(case_dir)
    model_path = os.path.join(case_dir, f"{name}.onnx")
    export_models.export(name, model_path, batch)
    inputs = export_models.example_inputs(name, batch)
    feeds = {}
    for input_name, t in inputs.items():
        feeds[input_name] = os.path.join(case_dir, f"{input_name}.npy")
        np.save(feeds[input_name], t.numpy())
    module = export_models.build(name).train()  # the exported weights and mode
    torch_loss, torch_n, torch_ms = time_torch(module, tuple(inputs.values()), args.warmup)
    ampc_n, ampc_ms = time_ampc(args, model_path, feeds, args.warmup)
    loss = ampc_loss(args, model_path, feeds, case_dir)
    return {"model": name, "batch": batch, "ampc": ampc_ms, "ampc_n": ampc_n,
            "torch": torch_ms, "torch_n": torch_n,
            "loss_diff": abs(loss - torch_loss) / max(abs(torch_loss), 1e-12)}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", default=os.path.join(ROOT, "build", "tools", "ampc", "ampc"),
                    help="the ampc binary (default: build/tools/ampc/ampc)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both sides (default 2)")
    ap.add_argument("--batches", default="1,64", help="comma-separated batch sizes")
    ap.add_argument("--models", default="mlp,cnn,gpt", help="comma-separated model names")
    ap.add_argument("--warmup", type=int, default=20, help="untimed iterations per side")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment for both sides (repeatable), "
                         "e.g. OMP_WAIT_POLICY=passive")
    return ap.parse_args()


def main():
    args = parse_args()
    if not os.access(args.ampc, os.X_OK):
        sys.exit(f"no ampc binary at {args.ampc}: build it first, or pass --ampc")
    for name in UNSET:
        os.environ.pop(name, None)
    threads = str(args.threads)
    os.environ.update(OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
    os.environ.update(kv.split("=", 1) for kv in args.env)
    global np, torch, export_models
    import numpy as np
    import torch
    import export_models
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    print(f"machine: {os.cpu_count()} CPUs, {cpu_model()}; torch {torch.__version__}; "
          f"{args.threads} threads per side (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, and "
          f"torch.set_num_threads)")
    print(f"unset for both sides: {', '.join(UNSET)}")
    if args.env:
        print(f"extra environment for both sides: {' '.join(args.env)}")
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    print("forward = the exported graph (forward + mean cross-entropy loss), training mode, "
          "no gradients; latency = median over timed iterations, [p10, p90] in brackets\n")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ampc_bench_") as tmp:
        for name in args.models.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                rows.append(bench_case(args, name, batch, tmp))
                r = rows[-1]
                print(f"  {name} batch {batch}: ampc {r['ampc'][0]:.3f} ms ({r['ampc_n']} it), "
                      f"torch {r['torch'][0]:.3f} ms ({r['torch_n']} it)", file=sys.stderr)

    print("load average after: %.2f %.2f %.2f\n" % os.getloadavg())
    print("| model | batch | ampc ms [p10, p90] | torch ms [p10, p90] | torch/ampc | "
          "loss rel. diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        a, t = r["ampc"], r["torch"]
        print(f"| {r['model']} | {r['batch']} | {a[0]:.3f} [{a[1]:.3f}, {a[2]:.3f}] | "
              f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}] | {t[0] / a[0]:.2f} | "
              f"{r['loss_diff']:.1e} |")
    print("\ntorch/ampc > 1: ampc is faster. loss rel. diff: |ampc - torch| / |torch| of the "
          "loss on the benchmark inputs (a sanity check that both ran the same computation).")


if __name__ == "__main__":
    main()
