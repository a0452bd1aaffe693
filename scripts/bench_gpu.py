#!/usr/bin/env python3
"""GPU benchmark: ampc's CUDA backend against PyTorch eager fp32 and eager AMP.

Run by tests/gpu/run.sh on a GPU machine (after the build), or by hand:

    python3 scripts/bench_gpu.py --ampc build-gpu/tools/ampc/ampc \
        --bench build-gpu/tests/cuda_plan_bench --work build-gpu/bench

or, anywhere, as a check of this script up to the point where a GPU is needed:

    python3 scripts/bench_gpu.py --dry-run --ampc ... --bench ... --work /tmp/bench-dry

--dry-run takes small models (a 2-layer gpt of width 64, the cnn at batch 64) and 2 timed
steps; without a CUDA device it still exports, checks and compiles both models for
cuda:sm_90, runs cuda_plan_bench (which must then say "no CUDA device") and the PyTorch
steps on the CPU (AMP as bf16 autocast, the GradScaler disabled), prints the table, and says
that no GPU was present. Without --dry-run and without a CUDA device the script stops at
once with "no CUDA device" (exit status 1).

Works with torch 1.13 (Debian 12) and torch 2.x (the GPU image's 2.11): the TorchScript
exporter is asked for explicitly where torch.onnx.export has a `dynamo` switch, and the
GradScaler comes from torch.amp where it is there.

Models: a larger gpt (models/export_models.py's GPT with 12 layers, width 768, 12 heads,
sequence 512, MLP width 3072, vocabulary 8192) and the example cnn at a GPU-sized batch.
Each is exported with torch (training mode, forward returns the loss, as
models/export_models.py exports), compiled by `ampc compile --train --precision fp16
--optimizer adam --target cuda:sm_XX`, and its training step timed on the device by
cuda_plan_bench (steps submitted without waiting, one CUDA Graph launch each). PyTorch runs
the same module, batch and Adam in eager fp32 and in eager AMP (torch.autocast fp16 +
GradScaler). Same GPU, one run; peak memory is what the ampc executor allocated and
torch.cuda.max_memory_allocated(). Prints one table last. A benchmark: nothing passes or
fails on its numbers.
"""
import argparse
import inspect
import io
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export_models as em  # noqa: E402

GPT_CONFIG = dict(vocab=8192, max_len=512, width=768, n_heads=12, n_layers=12, mlp_width=3072)
# --dry-run: small enough to export, compile and step on two shared CPU cores in seconds.
DRY_GPT_CONFIG = dict(vocab=256, max_len=32, width=64, n_heads=2, n_layers=2, mlp_width=128)


def build(name):
    torch.manual_seed(0)
    if name == "gpt":
        return em.GPT(**GPT_CONFIG)
    return em.CNN()


def make_data(name, batch, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name == "gpt":
        T, V = GPT_CONFIG["max_len"], GPT_CONFIG["vocab"]
        return {"tokens": torch.randint(0, V, (n * batch, T), generator=g),
                "targets": torch.randint(0, V, (n * batch, T), generator=g)}
    return {"x": torch.rand(n * batch, 1, 8, 8, generator=g),
            "y": torch.randint(0, 10, (n * batch,), generator=g)}


def export(name, batch, path):
    warnings.filterwarnings("ignore")
    model = build(name).train()
    data = make_data(name, batch, 1)
    buf = io.BytesIO()
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # the TorchScript exporter, as models/export_models.py
    torch.onnx.export(model, tuple(data.values()), buf, input_names=list(data),
                      output_names=["loss"], opset_version=em.OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      export_params=True, keep_initializers_as_inputs=False, **kwargs)
    data = buf.getvalue()
    check_graph(name, data)
    with open(path, "wb") as f:
        f.write(data)


def check_graph(name, data):
    """What ampc imports: standard ops only and the one output `loss` (as export_models.py
    checks; a dynamo-exported or ATen-fallback graph would fail here rather than in ampc)."""
    try:
        import onnx
    except ImportError:  # onnx is not needed to export; the check is a courtesy
        return
    m = onnx.load_from_string(data)
    bad = sorted({n.op_type for n in m.graph.node
                  if n.domain not in ("", "ai.onnx") or n.op_type == "ATen"})
    if bad:
        raise RuntimeError(f"{name}: the export has non-standard ops {bad}")
    outputs = [o.name for o in m.graph.output]
    if outputs != ["loss"]:
        raise RuntimeError(f"{name}: the export's graph outputs are {outputs}, not ['loss']")
    opsets = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    if opsets.get("ai.onnx") != em.OPSET:
        raise RuntimeError(f"{name}: exported with opset {opsets}, not {em.OPSET}")


class NoCudaDevice(RuntimeError):
    """cuda_plan_bench found no CUDA device (expected in --dry-run on a machine without one)."""


def ampc_target(args):
    if args.target:
        return args.target
    if not torch.cuda.is_available():
        return "cuda:sm_90"  # --dry-run without a GPU: the H200's target
    major, minor = torch.cuda.get_device_capability(0)
    return "cuda:sm_90" if major * 10 + minor >= 90 else "cuda:sm_80"


def run_ampc(args, name, batch, work, log):
    onnx_path = os.path.join(work, f"{name}.onnx")
    plan_path = os.path.join(work, f"{name}.fp16.plan")
    data_path = os.path.join(work, f"{name}.data.npz")
    t = time.time()
    export(name, batch, onnx_path)
    data = make_data(name, batch, args.warmup + args.steps, seed=1)
    np.savez(data_path, **{k: v.numpy() for k, v in data.items()})
    log(f"{name}: exported in {time.time() - t:.1f} s "
        f"({os.path.getsize(onnx_path) / 2**20:.1f} MiB, torch {torch.__version__})")
    target = ampc_target(args)
    t = time.time()
    run_tool([args.ampc, "compile", onnx_path, "--train", "--precision", "fp16",
              "--optimizer", "adam", "--lr", str(args.lr), "--target", target,
              "-o", plan_path], args.timeout)
    log(f"{name}: compiled for {target} in {time.time() - t:.1f} s")
    out = run_tool([args.bench, plan_path, data_path, "--steps", str(args.steps),
                    "--warmup", str(args.warmup)], args.timeout)
    result = json.loads(out.strip().splitlines()[-1])
    log(f"{name}: ampc {result}")
    return result


def run_tool(cmd, timeout):
    """Runs one of ampc's executables; its error message (the last lines of stderr) goes into
    the exception, so that the log says why, not only the exit status."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        err = " | ".join(p.stderr.strip().splitlines()[-3:]) or "(nothing on stderr)"
        if "no CUDA device" in p.stderr:
            raise NoCudaDevice(err)
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited with {p.returncode}: {err}")
    return p.stdout


def make_scaler(device, enabled):
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3; torch.cuda.amp's is deprecated there
        return torch.amp.GradScaler(device, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def run_torch(args, name, batch, amp, device):
    cuda = device == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    model = build(name).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # On the GPU, AMP is fp16 autocast + GradScaler, as ampc's fp16 plan. On the CPU (--dry-run
    # only) autocast knows bf16 alone, which needs no loss scaling: the scaler is disabled.
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    scaler = make_scaler(device, enabled=amp and cuda) if amp else None
    data = {k: v.to(device)
            for k, v in make_data(name, batch, args.warmup + args.steps, 1).items()}
    names = list(data)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step(i):
        xs = [data[k][i * batch:(i + 1) * batch] for k in names]
        with torch.autocast(device_type=device, dtype=amp_dtype, enabled=amp):
            loss = model(*xs)
        if amp:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(args.warmup):
        step(i)
    sync()
    t = time.time()
    for i in range(args.steps):
        loss = step(args.warmup + i)
    sync()
    ms = (time.time() - t) / args.steps * 1e3
    mib = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
    del model, opt, data
    return {"step_ms": ms, "mib": mib, "loss": float(loss)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--bench", required=True, help="the cuda_plan_bench executable")
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=None, help="timed steps (20; 2 with --dry-run)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (3; 1 with --dry-run)")
    ap.add_argument("--gpt-batch", type=int, default=None, help="8; 4 with --dry-run")
    ap.add_argument("--cnn-batch", type=int, default=None, help="4096; 64 with --dry-run")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--target", default=None,
                    help="ampc --target (default: from the device, cuda:sm_90 without one)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per ampc command")
    ap.add_argument("--dry-run", action="store_true",
                    help="small models; without a GPU, check everything up to the device")
    args = ap.parse_args()
    small = args.dry_run
    args.steps = args.steps or (2 if small else 20)
    args.warmup = args.warmup if args.warmup is not None else (1 if small else 3)
    args.gpt_batch = args.gpt_batch or (4 if small else 8)
    args.cnn_batch = args.cnn_batch or (64 if small else 4096)
    if small:
        GPT_CONFIG.update(DRY_GPT_CONFIG)

    def log(msg):
        print(f"[bench] {msg}", flush=True)

    has_cuda = torch.cuda.is_available()
    if not has_cuda and not small:
        # Nothing to measure; say so in one line instead of a traceback per model.
        print(f"bench_gpu: no CUDA device (torch {torch.__version__}: torch.cuda.is_available() "
              f"is False); the benchmark needs a GPU (--dry-run checks this script without one)",
              file=sys.stderr)
        return 1
    device = "cuda" if has_cuda else "cpu"
    for tool in (args.ampc, args.bench):
        if not os.access(tool, os.X_OK):
            print(f"bench_gpu: {tool} is not an executable", file=sys.stderr)
            return 1
    os.makedirs(args.work, exist_ok=True)
    log(f"torch {torch.__version__}, device {device}, gpt {GPT_CONFIG} batch {args.gpt_batch}, "
        f"cnn batch {args.cnn_batch}, {args.warmup} + {args.steps} steps")

    rows = []
    no_device = []  # cuda_plan_bench's "no CUDA device" messages (--dry-run without a GPU)
    failed = False
    for name, batch in (("gpt", args.gpt_batch), ("cnn", args.cnn_batch)):
        row = {"model": name, "batch": batch}
        try:
            row["ampc"] = run_ampc(args, name, batch, args.work, log)
        except NoCudaDevice as e:
            log(f"{name}: ampc exported and compiled; {e}")
            no_device.append(str(e))
            row["ampc"] = None
        except Exception as e:  # the table still comes, with the failure named
            log(f"{name}: ampc failed: {e}")
            row["ampc"] = None
            failed = True
        for key, amp in (("fp32", False), ("amp", True)):
            try:
                row[key] = run_torch(args, name, batch, amp, device)
                log(f"{name}: torch {key} {row[key]}")
            except Exception as e:
                log(f"{name}: torch {key} failed: {e}")
                row[key] = None
                failed = True
        rows.append(row)

    def ms(r):
        return f"{r['step_ms']:.2f}" if r else "n/a"

    def mib(r):
        return f"{r['mib']:.0f}" if r and r["mib"] is not None else "n/a"

    where = torch.cuda.get_device_name(0) if has_cuda else "the CPU (dry run, no CUDA device)"
    torch_amp = "AMP fp16" if has_cuda else "autocast bf16"
    print(f"\nTraining step on {where}: ampc fp16 plan (one CUDA Graph per step) vs PyTorch "
          f"eager ({args.steps} timed steps after {args.warmup} warm-up steps, Adam)")
    head = (f"| model | batch | ampc fp16 ms | torch fp32 ms | torch {torch_amp} ms | ampc / AMP | "
            "ampc MiB | torch fp32 MiB | torch AMP MiB | launches/step | syncs/step |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        a, f, m = r["ampc"], r["fp32"], r["amp"]
        cells = [r["model"], str(r["batch"]), ms(a), ms(f), ms(m),
                 f"{a['step_ms'] / m['step_ms']:.2f}" if a and m else "n/a",
                 f"{a['device_mib']:.0f}" if a else "n/a", mib(f), mib(m),
                 f"{a['graph_launches'] / a['steps']:.2f}" if a else "n/a",
                 f"{a['host_syncs'] / a['steps']:.2f}" if a else "n/a"]
        print("| " + " | ".join(cells) + " |")
    if not has_cuda:
        print(f"\nno GPU present: no CUDA device on this machine. The dry run exported and "
              f"compiled both models for {ampc_target(args)} and ran the PyTorch steps on the "
              f"CPU; cuda_plan_bench said: {no_device[0] if no_device else '(nothing: it ran?)'}")
        # A dry run passes when everything up to the device worked and the device was what
        # was missing, for both models.
        return 1 if failed or len(no_device) != len(rows) else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
