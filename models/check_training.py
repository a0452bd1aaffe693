#!/usr/bin/env python3
"""Sanity check: the example tasks are learnable by the exported PyTorch modules.

    /usr/bin/python3 models/check_training.py               # all three, CPU, ~1 min
    /usr/bin/python3 models/check_training.py gpt --steps 3000

Trains each module (the very classes export_models.py exports, same seed and same batch
size as the ONNX graph) with Adam on models/data/*.npz, prints the mean training loss
over windows of steps, and the accuracy on a held-out last 20% of the data. Nothing is
written; this only shows the loss going down (a reference for ampc's own training runs).
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (data file, input key, label key, batch size, steps, learning rate)
CONFIG = {
    "mlp": ("digits.npz", "x", "y", 32, 600, 1e-3),
    "cnn": ("digits_images.npz", "x", "y", 32, 600, 3e-3),
    "gpt": ("seqtask.npz", "tokens", "targets", 8, 3000, 3e-3),
}


def accuracy(model, name, x, y):
    """Accuracy of argmax predictions on non-ignored labels (teacher forcing for gpt)."""
    model.eval()  # BatchNorm uses running statistics here
    with torch.no_grad():
        if name == "gpt":
            # Re-run the forward pass up to the logits (the module itself returns the loss).
            h = model.tok_emb(x) + model.pos_emb[:x.shape[1]]
            for block in model.blocks:
                h = block(h)
            pred = model.head(model.ln_f(h)).argmax(-1)
        elif name == "mlp":
            pred = model.fc2(model.act(model.ln1(model.fc1(x)))).argmax(-1)
        else:
            h = model.pool1(torch.relu(model.bn1(model.conv1(x))))
            h = model.gap(torch.relu(model.bn2(model.conv2(h))))
            pred = model.fc(model.flatten(h)).argmax(-1)
    model.train()
    keep = y != -100
    return (pred[keep] == y[keep]).float().mean().item()


def train(name, steps=None, log_every=None):
    file, xkey, ykey, batch, default_steps, lr = CONFIG[name]
    steps = steps or default_steps
    log_every = log_every or steps // 6
    data = np.load(os.path.join(HERE, "data", file))
    x, y = torch.from_numpy(data[xkey]), torch.from_numpy(data[ykey])
    n_train = int(len(x) * 0.8)
    x_train, y_train, x_test, y_test = x[:n_train], y[:n_train], x[n_train:], y[n_train:]

    model = export_models.build(name).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1)
    print(f"== {name}: {n_train} train / {len(x_test)} test examples, batch {batch}, "
          f"Adam lr {lr}, {steps} steps")
    print(f"   test accuracy before: {accuracy(model, name, x_test, y_test):.3f}")
    window, order, pos = [], torch.randperm(n_train, generator=gen), 0
    for step in range(1, steps + 1):
        if pos + batch > n_train:  # new epoch; full batches only (the graph's shape is static)
            order, pos = torch.randperm(n_train, generator=gen), 0
        idx = order[pos:pos + batch]
        pos += batch
        loss = model(x_train[idx], y_train[idx])
        if step == 1:
            print(f"   step {0:5d}  loss {loss.item():.4f}  (first batch)")
        opt.zero_grad()
        loss.backward()
        opt.step()
        window.append(loss.item())
        if step % log_every == 0 or step == steps:
            print(f"   step {step:5d}  loss {np.mean(window):.4f}  (mean of last {len(window)})")
            window = []
    print(f"   test accuracy after:  {accuracy(model, name, x_test, y_test):.3f}")


def main():
    ap = argparse.ArgumentParser(description="train each example module briefly on CPU")
    ap.add_argument("names", nargs="*", default=list(CONFIG))
    ap.add_argument("--steps", type=int, default=None, help="override the step count")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    for name in args.names:
        train(name, args.steps)


if __name__ == "__main__":
    main()
