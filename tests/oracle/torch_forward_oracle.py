#!/usr/bin/env python3
"""PyTorch oracle for the forward loss of the example models (models/{mlp,cnn,gpt}.onnx).

Rebuilds each model's forward pass with torch functional ops from the ONNX file's
initializers (read with the onnx protobuf classes only; ONNX's reference runtime is not
used, nor is ampc), runs it on the first batch of the model's data set and writes

    OUT/<model>_<input>.npy   the input batch, C order, as the graph input's dtype
    OUT/expected.txt          one line per model: "<model> <loss float64> <loss float32>"

The float64 loss (same weights and inputs, computed in double precision) is the reference;
the float32 one is what PyTorch gets at the model's own precision.

    /usr/bin/python3 tests/oracle/torch_forward_oracle.py --models-dir models --out DIR
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

# model -> (data file, [(graph input, npz member)], batch size)
DATA = {
    "mlp": ("digits.npz", [("x", "x"), ("y", "y")], 32),
    "cnn": ("digits_images.npz", [("x", "x"), ("y", "y")], 32),
    "gpt": ("seqtask.npz", [("tokens", "tokens"), ("targets", "targets")], 8),
}
EPS = 1e-5  # LayerNorm / BatchNorm epsilon of the torch modules


def initializers(path):
    model = onnx.load(path)
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}


def params(weights, dtype):
    """Float initializers as tensors of `dtype`; others (bool masks) unchanged."""
    out = {}
    for name, a in weights.items():
        t = torch.from_numpy(np.array(a))
        out[name] = t.to(dtype) if t.is_floating_point() else t
    return out


def linear(p, prefix, x):
    return F.linear(x, p[prefix + ".weight"], p[prefix + ".bias"])


def layer_norm(p, prefix, x):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"], EPS)


def gelu(x):
    return F.gelu(x, approximate="none")


def mlp_loss(p, x, y):
    h = gelu(layer_norm(p, "ln1", linear(p, "fc1", x)))
    return F.cross_entropy(linear(p, "fc2", h), y)


def batch_norm_train(p, prefix, x):
    # Training mode: normalised with the batch statistics (biased variance). The running
    # statistics are updated on copies; they do not change the output.
    return F.batch_norm(x, p[prefix + ".running_mean"].clone(), p[prefix + ".running_var"].clone(),
                        p[prefix + ".weight"], p[prefix + ".bias"], training=True, momentum=0.1,
                        eps=EPS)


def cnn_loss(p, x, y):
    h = F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1)
    h = F.max_pool2d(F.relu(batch_norm_train(p, "bn1", h)), 2)
    h = F.conv2d(h, p["conv2.weight"], p["conv2.bias"], padding=1)
    h = F.adaptive_avg_pool2d(F.relu(batch_norm_train(p, "bn2", h)), 1)
    return F.cross_entropy(linear(p, "fc", torch.flatten(h, 1)), y)


def attention(p, prefix, x, n_heads):
    b, t, c = x.shape
    hs = c // n_heads

    def heads(v):  # [B, T, C] -> [B, H, T, hs]
        return v.reshape(b, t, n_heads, hs).transpose(1, 2)

    q = heads(linear(p, prefix + ".query", x))
    k = heads(linear(p, prefix + ".key", x))
    v = heads(linear(p, prefix + ".value", x))
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    att = att.masked_fill(p[prefix + ".causal_mask"][:t, :t], -1e4)
    out = torch.matmul(torch.softmax(att, dim=-1), v)
    return linear(p, prefix + ".proj", out.transpose(1, 2).reshape(b, t, c))


def gpt_loss(p, tokens, targets, n_layers=2, n_heads=2):
    t = tokens.shape[1]
    x = F.embedding(tokens, p["tok_emb.weight"]) + p["pos_emb"][:t]
    for i in range(n_layers):
        pre = f"blocks.{i}"
        x = x + attention(p, pre + ".attn", layer_norm(p, pre + ".ln1", x), n_heads)
        h = gelu(linear(p, pre + ".fc_in", layer_norm(p, pre + ".ln2", x)))
        x = x + linear(p, pre + ".fc_out", h)
    logits = linear(p, "head", layer_norm(p, "ln_f", x))
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=-100)


LOSS = {"mlp": mlp_loss, "cnn": cnn_loss, "gpt": gpt_loss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", required=True, help="folder with *.onnx and data/*.npz")
    ap.add_argument("--out", required=True, help="folder for the inputs and expected.txt")
    ap.add_argument("names", nargs="*", default=list(DATA))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    lines = []
    for name in args.names:
        data_file, members, batch = DATA[name]
        weights = initializers(os.path.join(args.models_dir, name + ".onnx"))
        npz = np.load(os.path.join(args.models_dir, "data", data_file))
        inputs = []
        for graph_input, member in members:
            a = np.ascontiguousarray(npz[member][:batch])
            np.save(os.path.join(args.out, f"{name}_{graph_input}.npy"), a)
            inputs.append(torch.from_numpy(a))
        losses = []
        for dtype in (torch.float64, torch.float32):
            p = params(weights, dtype)
            ins = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
            with torch.no_grad():
                losses.append(LOSS[name](p, *ins).item())
        # The two precisions must agree closely, or the oracle itself is suspect.
        if not math.isclose(losses[0], losses[1], rel_tol=1e-5, abs_tol=1e-6):
            sys.exit(f"{name}: float64 loss {losses[0]!r} and float32 loss {losses[1]!r} disagree")
        lines.append(f"{name} {losses[0]!r} {losses[1]!r}\n")
    with open(os.path.join(args.out, "expected.txt"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
