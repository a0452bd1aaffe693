"""`--sync-batchnorm` (docs/data-parallel.md, passes/sync_batch_norm.h) on models/cnn.onnx (two
BatchNorm2d), fp32, SGD with momentum, shuffled, 12 steps.

Usage: sync_batchnorm_test.py AMPC_BINARY SOURCE_DIR
  - 2 ranks x batch 32 with --sync-batchnorm give the losses, parameters AND running statistics
    of 1 process x batch 64 (the oracle: the same global batch on one process, where the
    batch statistics are the global ones by definition) within 1e-5 relative, as
    data_parallel_test.py's equivalence; without --sync-batchnorm the same two set-ups differ
    by far more (per-rank statistics), so the comparison can fail;
  - the states are bit-identical on the two ranks (--check-replicas), and the held-out
    evaluation (running statistics) agrees with the single process's;
  - one process with the option equals one without: losses, parameters and running
    statistics within 1e-5 (both take PyTorch's unbiased running variance, plain BatchNorm by
    default for a PyTorch export); with `--batchnorm-running-var biased` (ONNX's update) the
    running mean still does, and with momentum m, T steps and initial value v0:
    var_sync - m^T v0 = n / (n - 1) * (var_biased - m^T v0), n = the elements per channel of
    the batch (hand-derived from the update rule);
  - one SGD step (lr 1, so the update is the gradient) of a plan compiled with
    `ampc compile --train --data-parallel --sync-batchnorm` and trained by a plain process:
    the loss, every parameter gradient and the running statistics against PyTorch float64's
    BatchNorm2d (SyncBatchNorm on one process is BatchNorm2d) within 1e-5;
  - refusals: without data parallel, and on a model without BatchNorm;
  - rank 1 stopped (SIGSTOP) mid-run: rank 0 stops with an error naming it after
    --comm-timeout (the forward's blocking all-reduces wait like the gradient buckets).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

AMPC, SRC = sys.argv[1], sys.argv[2]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
CNN = os.path.join(SRC, "models/cnn.onnx")
DATA = os.path.join(SRC, "models/data/digits_images.npz")
STEPS = 12
COMMON = ["--steps", str(STEPS), "--shuffle", "--seed", "4", "--optimizer", "sgd",
          "--momentum", "0.9", "--lr", "0.05", "--holdout", "0.1", "--bucket-kib", "4"]
BATCH_64 = ["--input-shape", "x=64x1x8x8", "--input-shape", "y=64"]
MOMENTUM = 0.9  # the export's (ONNX convention; torch's 0.1)
INITIAL = {t.name: numpy_helper.to_array(t).astype(np.float64)
           for t in onnx.load(CNN).graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
MODEL_FLOATS = set(INITIAL)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
    if expect_ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit("command failed: " + " ".join(cmd))
    return p


def train(d, name, extra, ranks=0):
    """ranks: 0 a plain process, N under mpirun -np N. Returns (losses, state, stdout)."""
    log, ckpt = os.path.join(d, name + ".jsonl"), os.path.join(d, name + ".onnx")
    mpi = ["mpirun", "--oversubscribe", "-np", str(ranks)] if ranks else []
    p = run(mpi + [AMPC, "train", CNN, "--data", DATA, "--log", log, "--checkpoint", ckpt] +
            COMMON + extra)
    with open(log) as f:
        losses = [json.loads(line)["loss"] for line in f]
    # The model's own float initializers (the checkpoint also holds the passes' constants).
    state = {t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in onnx.load(ckpt).graph.initializer if t.name in MODEL_FLOATS}
    return losses, state, p.stdout


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-3)))


def norm_rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def state_err(s, ref, keys):
    return max(norm_rel(s[k], ref[k]) for k in keys)


def held_out_loss(stdout):
    m = re.search(r"held-out: \d+ samples: loss ([0-9.eE+-]+)", stdout)
    return float(m.group(1)) if m else None


def main(d):
    one_sync, ref, out_one = train(d, "one_sync", ["--sync-batchnorm"] + BATCH_64, ranks=1)
    two_sync, s2, out_two = train(d, "two_sync", ["--sync-batchnorm", "--check-replicas"], ranks=2)
    one_plain, ref_plain, _ = train(d, "one_plain", BATCH_64)
    two_plain, s2_plain, _ = train(d, "two_plain", [], ranks=2)
    check(len(one_sync) == len(two_sync) == STEPS, "%d logged steps each" % STEPS)
    running = sorted(k for k in ref if "running" in k)
    params = sorted(k for k in ref if k not in running)
    check(len(running) == 4, "the running statistics of both BatchNorms: %s" % running)

    loss_err, param_err, stat_err = (rel(two_sync, one_sync), state_err(s2, ref, params),
                                     state_err(s2, ref, running))
    print("     sync:  loss max rel err %.2e, parameters %.2e, running statistics %.2e "
          "(norm-wise per tensor)" % (loss_err, param_err, stat_err))
    check(loss_err <= 1e-5 and param_err <= 1e-5 and stat_err <= 1e-5,
          "2 ranks x 32 with --sync-batchnorm = 1 process x 64: losses, parameters and running "
          "statistics within 1e-5")
    plain = (rel(two_plain, one_plain), state_err(s2_plain, ref_plain, params),
             state_err(s2_plain, ref_plain, running))
    print("     plain: loss max rel err %.2e, parameters %.2e, running statistics %.2e" % plain)
    check(min(plain) > 100 * max(loss_err, param_err, stat_err, 1e-7) and min(plain) > 1e-4,
          "without --sync-batchnorm the same set-ups differ far more (per-rank statistics)")
    check("replicas: " in out_two and "identical on 2 ranks" in out_two,
          "--check-replicas with --sync-batchnorm: " +
          next((l for l in out_two.splitlines() if l.startswith("replicas")), "no line"))
    e1, e2 = held_out_loss(out_one), held_out_loss(out_two)
    check(e1 is not None and e2 is not None and abs(e1 - e2) <= 1e-4 * abs(e1),
          "held-out evaluation (running statistics) on 2 ranks: %s, on 1 process: %s" % (e2, e1))

    # One process (mpirun -np 1: a world of one rank) with the option = one without.
    alone_sync, a_s, _ = train(d, "alone_sync", ["--sync-batchnorm"], ranks=1)
    alone, a_p, _ = train(d, "alone", ["--batchnorm-running-var", "biased"])
    _, a_default, _ = train(d, "alone_default", [])
    means = [k for k in running if "mean" in k]
    variances = [k for k in running if "var" in k]
    err = (rel(alone_sync, alone), state_err(a_s, a_p, params), state_err(a_s, a_p, means))
    print("     one process, with vs without: loss %.2e, parameters %.2e, running means %.2e" % err)
    check(max(err) <= 1e-5, "one process: --sync-batchnorm equals plain BatchNorm within 1e-5")
    decay = MOMENTUM ** STEPS
    # Elements per channel of a batch of 32: bn1 on 8x8, bn2 on 4x4 (after the max pool).
    counts = {k: 32 * (64 if k.startswith("bn1") else 16) for k in variances}
    var_err = max(norm_rel(a_s[k] - decay * INITIAL[k],
                           counts[k] / (counts[k] - 1) * (a_p[k] - decay * INITIAL[k]))
                  for k in variances)
    check(var_err <= 1e-5, "running variances: the unbiased update (n/(n-1) of the biased "
          "one's increments) within %.2e" % var_err)
    default_err = state_err(a_default, a_s, running)
    check(default_err <= 1e-5, "one process without the option, PyTorch's running variance by "
          "default: the running statistics within %.2e" % default_err)

    p = run([AMPC, "train", CNN, "--data", DATA, "--steps", "1", "--sync-batchnorm"],
            expect_ok=False)
    check(p.returncode != 0 and "--sync-batchnorm needs data parallel" in p.stderr,
          "refused without data parallel: " + p.stderr.strip().splitlines()[-1])
    p = run(["mpirun", "-np", "1", AMPC, "train", os.path.join(SRC, "models/mlp.onnx"), "--data",
             os.path.join(SRC, "models/data/digits.npz"), "--steps", "1", "--sync-batchnorm"],
            expect_ok=False)
    check(p.returncode != 0 and "no BatchNormalization in training mode" in p.stderr,
          "refused on a model without BatchNorm")

    log = os.path.join(d, "hang.jsonl")
    stopper = ('if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then (while [ ! -s %s ]; do sleep 0.05; '
               'done; kill -STOP $$) & fi; exec "$@"' % log)
    t0 = time.monotonic()
    p = run(["mpirun", "--oversubscribe", "-np", "2", "sh", "-c", stopper, "sh", AMPC, "train",
             CNN, "--data", DATA, "--steps", "1000000", "--sync-batchnorm", "--comm-timeout", "3",
             "--log", log], expect_ok=False)
    took = time.monotonic() - t0
    err = [l for l in p.stderr.splitlines() if l.startswith("ampc: error: rank 0:")]
    check(p.returncode != 0 and err and "rank 1" in err[0] and took < 60,
          "rank 1 hung: rank 0 stops after %.1f s: %s" % (took, err[0] if err else p.stderr))


def against_torch(d):
    """One step of the decomposed BatchNorm against PyTorch float64 (an independent oracle)."""
    import torch
    sys.path.insert(0, os.path.join(SRC, "models"))
    from export_models import CNN as TorchCNN
    plan, log, ckpt = (os.path.join(d, n) for n in ("cnn.plan", "step.jsonl", "step.onnx"))
    emitted = os.path.join(d, "step_graph.onnx")
    run([AMPC, "compile", "--train", "--data-parallel", "--sync-batchnorm", "--target", "cpu",
         "--optimizer", "sgd", "--lr", "1", CNN, "-o", plan, "--emit-onnx", emitted])
    # The all-reduces docs/data-parallel.md counts: per BatchNorm 2 in the forward (the main
    # graph) and 2 in the backward (the training algorithm), plus the world size once.
    step = onnx.load(emitted)
    forward = [n for n in step.graph.node if n.op_type == "AllReduceSum"]
    backward = [n for g in step.training_info for n in g.algorithm.node
                if n.op_type == "AllReduceSum"]
    check(len(forward) == 1 + 2 * 2 and len(backward) == 2 * 2,
          "all-reduces of the 2 BatchNorms: %d in the forward (1 + 2 x 2), %d in the backward "
          "(2 x 2)" % (len(forward), len(backward)))
    run([AMPC, "train", plan, "--data", DATA, "--steps", "1", "--log", log, "--checkpoint", ckpt])
    with open(log) as f:
        loss = json.loads(f.readline())["loss"]
    after = {t.name: numpy_helper.to_array(t).astype(np.float64)
             for t in onnx.load(ckpt).graph.initializer if t.name in MODEL_FLOATS}
    data = np.load(DATA)

    def torch_step(dtype):
        """PyTorch's loss, parameters after the step (in `dtype`) and running statistics."""
        model = TorchCNN().to(dtype).train()
        with torch.no_grad():
            for name, t in list(model.named_parameters()) + list(model.named_buffers()):
                if name in INITIAL:
                    t.copy_(torch.from_numpy(INITIAL[name]))
        x = torch.from_numpy(data["x"][:32]).to(dtype)  # step 1: the first batch
        loss = model(x, torch.from_numpy(data["y"][:32]))
        loss.backward()
        with torch.no_grad():
            stepped = {k: (p - p.grad).double().numpy() for k, p in model.named_parameters()}
        buffers = {k: b.double().numpy() for k, b in model.named_buffers() if k in INITIAL}
        return loss.item(), stepped, buffers

    expected_loss, expected, stats = torch_step(torch.float64)
    _, float32, _ = torch_step(torch.float32)
    # Per parameter: ampc's distance from float64's step within 3x PyTorch float32's own (the
    # zoo's rule), or 1e-5 of the gradient's norm. The convolutions' biases before a BatchNorm
    # have gradient 0 (the mean subtracts them): only float32 rounding is left in theirs.
    grad_err = 0.0
    for k in expected:
        g = np.linalg.norm(INITIAL[k] - expected[k])
        ours, theirs = (np.linalg.norm(v[k] - expected[k]) for v in (after, float32))
        print("     %-13s |grad| %.3e, error %.3e, PyTorch float32's %.3e" % (k, g, ours, theirs))
        grad_err = max(grad_err, ours / max(3 * theirs, 1e-5 * g))
    stat_err = max(norm_rel(after[k], stats[k]) for k in stats)
    loss_err = abs(loss - expected_loss) / abs(expected_loss)
    print("     one step against PyTorch float64: loss %.2e, running statistics %.2e, worst "
          "parameter at %.2f of its bound" % (loss_err, stat_err, grad_err))
    check(loss_err <= 1e-5 and grad_err <= 1 and stat_err <= 1e-5,
          "decomposed BatchNorm: loss and running statistics of one step within 1e-5 of PyTorch "
          "float64, every parameter's step within 3x PyTorch float32's error (or 1e-5)")


with tempfile.TemporaryDirectory() as d:
    main(d)
    against_torch(d)
sys.exit(1 if failures else 0)
