#!/usr/bin/python3
"""Train a PyTorch module with ampc in fp16, copy the weights back, evaluate in PyTorch.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_torch_module.py

The module is an ordinary torch.nn.Module whose forward returns the loss; ampc exports it
(torch.onnx.export in training mode), compiles its training step with autocast to fp16,
fp32 master weights and dynamic loss scaling, and runs it on ampc's CPU runtime.
"""

import os

import numpy as np
import torch

import ampc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


class DigitsNet(torch.nn.Module):
    """8x8 digit images: a small residual MLP with dropout (not one of models/)."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(64, 96)
        self.block = torch.nn.Sequential(torch.nn.LayerNorm(96), torch.nn.Linear(96, 96),
                                         torch.nn.SiLU())
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(96, 10)

    def scores(self, x):
        h = torch.relu(self.inp(x))
        return self.head(self.drop(h + self.block(h)))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.scores(x), y)


data = np.load(os.path.join(ROOT, "models", "data", "digits.npz"))
x, y = data["x"].astype(np.float32), data["y"].astype(np.int64)
n_train = int(0.8 * len(x))
torch.manual_seed(0)
model, batch = DigitsNet(), 32

# The training loop.
trainer = ampc.compile(model, {"x": x[:batch], "y": y[:batch]}, precision="fp16",
                       optimizer="adam", lr=2e-3, seed=1)
rng = np.random.default_rng(1)
for epoch in range(8):
    order = rng.permutation(n_train)
    for k in range(n_train // batch):
        idx = order[k * batch:(k + 1) * batch]
        r = trainer.step(x=x[idx], y=y[idx])
    print(f"epoch {epoch + 1}: loss {r.loss:.4f}, loss scale {r.scale:g}, "
          f"grad norm {r.grad_norm:.3f}, skipped {r.skipped}")
trainer.copy_to(model)

# Evaluated by PyTorch, on the held-out 20%.
model.eval()
with torch.no_grad():
    held_x, held_y = torch.from_numpy(x[n_train:]), torch.from_numpy(y[n_train:])
    accuracy = (model.scores(held_x).argmax(1) == held_y).float().mean().item()
    loss = model(held_x, held_y).item()
print(f"{trainer.steps_done} steps; held-out ({len(held_y)} samples, PyTorch): "
      f"loss {loss:.4f}, accuracy {100 * accuracy:.2f}%")
