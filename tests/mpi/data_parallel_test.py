"""Data-parallel training under `mpirun --oversubscribe -np 2` (docs/data-parallel.md).

Usage: data_parallel_test.py CASE AMPC_BINARY SOURCE_DIR, CASE one of:
  equivalence  2 ranks x batch B against 1 rank x batch 2B on the same seed, 20 steps
               (mlp: Adam, gpt: SGD with momentum), mlp and gpt: fp32 losses and parameters within 1e-5 relative; fp16 with
               dynamic scaling (mlp's data overflows at step 4): the
               same skipped steps and scales.
  overflow     fp16, data that overflows fp16 on rank 1 only at step 4: both ranks skip it,
               the scale halves, every state is bit-identical across ranks (--check-replicas).
  faults       a rank killed mid-run: mpirun exits non-zero, naming it, within a bound; a rank
               that hangs (SIGSTOP): the other stops with an error naming it after
               --comm-timeout; ranks given different plans are refused at start.
  resume       a 2-rank checkpoint resumed on 2 ranks gives the bits of an uninterrupted run;
               resumed on 1 rank with batch 2B, the same run within 1e-5.
The oracle of each comparison is the single-process trainer on the global batch.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

CASE, AMPC, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
DIGITS = os.path.join(SRC, "models/data/digits.npz")
MLP = os.path.join(SRC, "models/mlp.onnx")
MPIRUN = ["mpirun", "--oversubscribe", "-np", "2"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd, expect_ok=True, timeout=120):
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    if expect_ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit("command failed: " + " ".join(cmd))
    return p


def train(model, data, log, extra=(), ranks=1):
    cmd = [AMPC, "train", model, "--data", data, "--log", log] + list(extra)
    return run((MPIRUN if ranks == 2 else []) + cmd)


def log_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def params(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def max_rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3))) if a.size else 0.0


def norm_rel(a, b):
    """||a - b|| / ||b|| over one tensor: the norm-wise measure the zoo's gradient check uses
    (element-wise, a weight near zero that 20 steps of rounding moved by 1e-8 dominates)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nb = float(np.linalg.norm(b))
    return float(np.linalg.norm(a - b)) / nb if nb > 0 else float(np.linalg.norm(a))


def equivalence(d):
    gpt8, gpt16 = os.path.join(d, "b8"), os.path.join(d, "b16")
    for folder, batch in ((gpt8, 8), (gpt16, 16)):
        os.makedirs(folder)
        run(["/usr/bin/python3", os.path.join(SRC, "models/export_models.py"), "--out", folder,
             "--batch", str(batch), "gpt"])
    seq = os.path.join(SRC, "models/data/seqtask.npz")
    # The overflow data of overflow(): samples 224..255 beyond fp16 (global batch 3 of 64).
    bad = os.path.join(d, "bad.npz")
    data = dict(np.load(DIGITS))
    data["x"] = data["x"].copy()
    data["x"][224:256] = 1e6
    np.savez(bad, **data)
    common = ["--steps", "20", "--bucket-kib", "16"]
    # (model, B plan, 2B plan, data, fp16 data, options, options of the 2B plan)
    cases = [("mlp", MLP, MLP, DIGITS, bad, ["--optimizer", "adam", "--lr", "1e-3"],
              ["--input-shape", "x=64x64", "--input-shape", "y=64"]),
             ("gpt", os.path.join(gpt8, "gpt.onnx"), os.path.join(gpt16, "gpt.onnx"), seq, seq,
              ["--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.02", "--shuffle", "--seed", "3"],
              [])]
    for name, small, large, data, fp16_data, opts, big_shape in cases:
        for precision in ("fp32", "fp16"):
            # fp16: mlp's data overflows at step 4. (A scale grown until the backward overflows
            # is no test: a rank's local gradients, mean over B samples, are twice those of
            # one process over 2B, so the overflow comes one scale earlier, as with DDP.)
            p = ["--precision", precision]
            feed = fp16_data if precision == "fp16" else data
            one, two = os.path.join(d, "one.jsonl"), os.path.join(d, "two.jsonl")
            c1, c2 = os.path.join(d, "one.onnx"), os.path.join(d, "two.onnx")
            train(large, feed, one, common + opts + p + big_shape + ["--checkpoint", c1])
            train(small, feed, two, common + opts + p + ["--checkpoint", c2], ranks=2)
            l1, l2 = log_of(one), log_of(two)
            what = "%s %s, 2 ranks x B vs 1 rank x 2B" % (name, precision)
            check(len(l1) == len(l2) == 20, what + ": 20 logged steps each")
            check([e["skipped"] for e in l1] == [e["skipped"] for e in l2] and
                  [e["scale"] for e in l1] == [e["scale"] for e in l2],
                  what + ": same skipped steps %s and scales %s" %
                  ([i + 1 for i, e in enumerate(l1) if e["skipped"]],
                   sorted(set(e["scale"] for e in l1))))
            if precision == "fp32":
                loss_err = max_rel([e["loss"] for e in l2], [e["loss"] for e in l1])
                p1, p2 = params(c1), params(c2)
                # Trained parameters (float); the exports' int64 shape constants hold the batch.
                keys = [k for k in p1 if p1[k].dtype == np.float32]
                param_err = max(norm_rel(p2[k], p1[k]) for k in keys)
                elementwise = max(max_rel(p2[k], p1[k]) for k in keys)
                print("     %s fp32: loss max rel err %.2e, parameters %.2e norm-wise per tensor "
                      "(%.2e element-wise)" % (name, loss_err, param_err, elementwise))
                check(loss_err <= 1e-5 and param_err <= 1e-5,
                      what + ": losses and parameters within 1e-5 relative")


def overflow(d):
    data = dict(np.load(DIGITS))
    # Global batch 3 (step 4) is samples 192..255 without shuffle; rank 1 reads 224..255.
    data["x"] = data["x"].copy()
    data["x"][224:256] = 1e6
    bad = os.path.join(d, "bad.npz")
    np.savez(bad, **data)
    log = os.path.join(d, "log.jsonl")
    p = train(MLP, bad, log, ["--steps", "8", "--precision", "fp16", "--optimizer", "sgd",
                              "--lr", "0.1", "--check-replicas"], ranks=2)
    entries = log_of(log)
    check([e["skipped"] for e in entries] == [False, False, False, True] + [False] * 4,
          "fp16 overflow on rank 1 at step 4: step 4 skipped (and only it)")
    check(entries[4]["scale"] == entries[3]["scale"] / 2, "the scale halved after it")
    check("replicas: " in p.stdout and "identical on 2 ranks" in p.stdout,
          "every state bit-identical across the ranks: " +
          next((l for l in p.stdout.splitlines() if l.startswith("replicas")), ""))


def faults(d):
    log = os.path.join(d, "log.jsonl")
    base = [AMPC, "train", MLP, "--data", DIGITS, "--steps", "1000000", "--log", log]
    # Rank 1 kills itself (SIGKILL) once rank 0 has logged a step.
    killer = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (while [ ! -s %s ]; do sleep 0.05; done; '
              'kill -9 $$) & fi; exec "$@"' % log)
    t0 = time.monotonic()
    p = run(MPIRUN + ["sh", "-c", killer, "sh"] + base, expect_ok=False, timeout=90)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    check(p.returncode != 0 and "rank 1" in out and took < 60,
          "rank 1 killed: mpirun exits %d after %.1f s naming rank 1" % (p.returncode, took))
    os.remove(log)
    # Rank 1 stops (SIGSTOP): rank 0's collective times out and names it.
    stopper = killer.replace("kill -9", "kill -STOP")
    t0 = time.monotonic()
    p = run(MPIRUN + ["sh", "-c", stopper, "sh"] + base + ["--comm-timeout", "5"],
            expect_ok=False, timeout=90)
    took = time.monotonic() - t0
    err = [l for l in p.stderr.splitlines() if l.startswith("ampc: error: rank 0:")]
    check(p.returncode != 0 and err and "rank 1" in err[0] and took < 60,
          "rank 1 hung: rank 0 stops after %.1f s: %s" % (took, err[0] if err else p.stderr))
    # Different plans (rank 1 another learning rate) are refused before the first step.
    lr = '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && set -- "$@" --lr 0.5; exec "$@"'
    p = run(MPIRUN + ["sh", "-c", lr, "sh", AMPC, "train", MLP, "--data", DIGITS, "--steps", "5"],
            expect_ok=False)
    check(p.returncode != 0 and "differ from rank 0's" in p.stderr,
          "mismatched plans refused: " + next((l for l in p.stderr.splitlines() if "differ" in l), ""))


def resume(d):
    common = ["--shuffle", "--seed", "5", "--optimizer", "adam", "--lr", "1e-3"]
    full, half, r2, r1 = (os.path.join(d, n + ".onnx") for n in ("full", "half", "r2", "r1"))
    log = os.path.join(d, "log.jsonl")
    train(MLP, DIGITS, log, common + ["--steps", "20", "--checkpoint", full], ranks=2)
    train(MLP, DIGITS, log, common + ["--steps", "10", "--checkpoint", half], ranks=2)
    train(MLP, DIGITS, log, common + ["--steps", "10", "--resume", half, "--checkpoint", r2],
          ranks=2)
    check(log_of(log)[0]["step"] == 11, "the resumed log goes on at step 11")
    pf, p2 = params(full), params(r2)
    check(all(np.array_equal(pf[k], p2[k]) for k in pf),
          "2-rank checkpoint resumed on 2 ranks: the bits of 20 steps in one run")
    train(MLP, DIGITS, log, common + ["--steps", "10", "--resume", half, "--checkpoint", r1,
                                      "--input-shape", "x=64x64", "--input-shape", "y=64"])
    p1 = params(r1)
    err = max(max_rel(p1[k], pf[k]) for k in pf)
    check(err <= 1e-5, "resumed on 1 rank x 2B: the 2-rank run within 1e-5 (%.2e)" % err)


with tempfile.TemporaryDirectory() as d:
    {"equivalence": equivalence, "overflow": overflow, "faults": faults, "resume": resume}[CASE](d)
sys.exit(1 if failures else 0)
