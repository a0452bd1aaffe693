#!/usr/bin/env python3
"""PyTorch oracle for `ampc train models/mlp.onnx --holdout F`: the held-out loss and accuracy
of a checkpoint over every held-out sample (the last round(F * n) of the data), computed in
float64 with torch's functional ops from the checkpoint's initializers (read with the onnx
protobuf classes; neither ampc nor an ONNX runtime is used). Prints "<samples> <loss> <accuracy>".

    /usr/bin/python3 tests/cli/heldout_oracle.py CHECKPOINT.onnx DATA.npz FRACTION
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
from torch_forward_oracle import gelu, initializers, layer_norm, linear, params  # noqa: E402


def main():
    checkpoint, data, fraction = sys.argv[1], sys.argv[2], float(sys.argv[3])
    p = params(initializers(checkpoint), torch.float64)
    d = np.load(data)
    n = d["x"].shape[0]
    held = int(np.floor(fraction * n + 0.5))  # std::llround
    x = torch.from_numpy(d["x"][n - held:]).to(torch.float64)
    y = torch.from_numpy(d["y"][n - held:])
    logits = linear(p, "fc2", gelu(layer_norm(p, "ln1", linear(p, "fc1", x))))
    loss = F.cross_entropy(logits, y).item()
    accuracy = (logits.argmax(dim=1) == y).double().mean().item()
    print(held, repr(loss), repr(accuracy))


if __name__ == "__main__":
    main()
