#!/usr/bin/env python3
"""PyTorch oracle for LpNormalization (a generic row op, kernels/shared/row_ops.h) in a model
trained end to end, the way a user gets the op into ONNX: torch 1.13 has no exporter for it,
so the model's normalisation is a torch.autograd.Function with an ONNX `symbolic` (PyTorch's
own recipe for custom ops) that emits LpNormalization, and computes x / x.norm(p, axis) in
PyTorch. The model is a cosine-softmax classifier (NormFace-style) over sequences of features:
  Linear -> LpNormalization(axis 1, p 1)   an inner axis: the kernels' column layout
  -> Tanh -> Linear -> LpNormalization(axis -1, p 2)   the last axis: the row layout
  -> flatten -> LpNormalization(axis -1, p 2) -> x @ (10 * LpNormalization(W, axis 1, p 2))^T
  -> cross-entropy
(the last normalises a parameter, so its gradient reaches W through the op).

It writes the zoo's export layout (model.onnx, batch/, data.npz, grad64/, grad32/) and runs
the zoo's checks on it (tests/zoo/run_zoo.py): step-1 gradients of ampc (zoo_gradients, fp32,
CPU) against PyTorch float64 within max(3 x PyTorch float32's error, 1e-5); `ampc compile
--train` in fp32, fp16 and bf16; 10 training steps in fp16 and bf16 that stay finite.

    lp_norm_oracle.py --ampc BIN --gradients BIN --work DIR
"""
import argparse
import io
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "zoo"))
import run_zoo  # noqa: E402
import zoo_export  # noqa: E402


class LpNormalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, axis, p):
        return x / x.norm(p, axis, keepdim=True)

    @staticmethod
    def symbolic(g, x, axis, p):
        return g.op("LpNormalization", x, axis_i=axis, p_i=p)


def lp_normalize(x, axis, p):
    if torch.onnx.is_in_onnx_export():
        return LpNormalize.apply(x, axis, p)
    return x / x.norm(p, axis, keepdim=True)


class CosineClassifier(nn.Module):
    def __init__(self, features=10, width=12, seq=6, classes=5):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.mid = nn.Linear(width, width)
        self.weight = nn.Parameter(torch.randn(classes, seq * width))

    def forward(self, x, y):
        h = lp_normalize(self.inp(x), 1, 1)  # [batch, seq, width] along seq
        h = lp_normalize(self.mid(torch.tanh(h)), -1, 2)
        h = lp_normalize(h.flatten(1), -1, 2)
        logits = h @ (10.0 * lp_normalize(self.weight, 1, 2)).t()
        return F.cross_entropy(logits, y)


def export(out):
    torch.manual_seed(0)
    model = CosineClassifier().train()
    inputs = {"x": torch.randn(4, 6, 10), "y": torch.tensor([0, 3, 1, 4])}
    buf = io.BytesIO()
    torch.onnx.export(model, tuple(inputs.values()), buf, input_names=list(inputs),
                      output_names=["loss"], opset_version=zoo_export.OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(buf.getvalue())
    for k, v in inputs.items():
        zoo_export.save_npy(os.path.join(out, "batch", k + ".npy"), v.numpy())
    zoo_export.save_npz(os.path.join(out, "data.npz"), zoo_export.training_data(inputs))
    _, g64 = zoo_export.gradients(model, inputs, torch.float64)
    _, g32 = zoo_export.gradients(model, inputs, torch.float32)
    for p, g in g64.items():
        zoo_export.save_npy(os.path.join(out, "grad64", p + ".npy"), g)
        zoo_export.save_npy(os.path.join(out, "grad32", p + ".npy"), g32[p].astype(np.float32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--gradients", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.model = "lp_norm_cosine"
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    src = os.path.join(args.work, "export")
    out = os.path.join(args.work, "run")
    export(src)
    import onnx
    ops = {n.op_type for n in onnx.load(os.path.join(src, "model.onnx")).graph.node}
    assert "LpNormalization" in ops, f"the export has no LpNormalization: {sorted(ops)}"
    result = {}
    try:
        run_zoo.gradient_check(args, src, out, result)
        run_zoo.compile_all(args, src, out, result)
        run_zoo.train(args, src, out, result, "fp16")
        run_zoo.train(args, src, out, result, "bf16")
    except run_zoo.Failure as e:
        print(f"lp_norm_oracle: FAILED: {e}")
        return 1
    print(f"lp_norm_oracle: step-1 gradient error {result['grad_error']:.3g} "
          f"(PyTorch float32: {result['torch32_error']:.3g}); fp16 loss "
          f"{result['train_fp16']['first_loss']:.4f} -> {result['train_fp16']['last_loss']:.4f}, "
          f"bf16 {result['train_bf16']['first_loss']:.4f} -> "
          f"{result['train_bf16']['last_loss']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
