"""What the rounding oracles share: their command line (script_oracles_test.cc passes --ampc,
--models-dir and --out to every script), running ampc, and one SGD step of a module's loss."""
import argparse
import json
import os
import subprocess
import sys


def parse_args(precisions):
    """--ampc BIN --out DIR [--models-dir DIR] PRECISION, one of `precisions`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--models-dir")  # not used: these oracles make their modules
    ap.add_argument("--out", required=True)
    ap.add_argument("precision", choices=sorted(precisions))
    return ap.parse_args()


def run(cmd):
    """Runs an ampc command; exits with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout + r.stderr)


def one_sgd_step(a, module, inputs, stem, extra=()):
    """Exports `module` (its forward returning the loss) in training mode with `inputs` (a dict
    of name -> tensor, one batch), runs one `ampc train` step of SGD at lr 1 (plus `extra`
    options) and returns the checkpoint's state, name -> numpy array. Exits when ampc skips
    the step."""
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    model = os.path.join(a.out, stem + ".onnx")
    torch.onnx.export(module, tuple(inputs.values()), model, input_names=list(inputs),
                      output_names=["loss"], opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    data = os.path.join(a.out, stem + "_batch.npz")
    np.savez(data, **{k: v.numpy() for k, v in inputs.items()})
    log, ckpt = os.path.join(a.out, stem + "_log.jsonl"), os.path.join(a.out, stem + "_ckpt.onnx")
    run([a.ampc, "train", model, "--data", data, "--steps", "1", "--optimizer", "sgd", "--lr",
         "1", *extra, "--log", log, "--checkpoint", ckpt])
    with open(log) as f:
        if json.loads(f.readline())["skipped"]:
            sys.exit(f"FAILED: ampc skipped the step of {stem}")
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(ckpt).graph.initializer}
