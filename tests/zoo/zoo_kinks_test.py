"""zoo_kinks.explain_model on a two-layer MLP with one hidden pre-activation placed 1e-9 from
ReLU's kink (ctest `zoo.kinks`, label `zoo`). The oracle is the MLP's backward written out
by hand in float64 with that unit's mask flipped: the second look must find exactly that
flip and match it, must not explain a gradient that is off by more than a flip, and a plain
float64 gradient needs no flip."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_kinks  # noqa: E402

torch.manual_seed(0)
N, D, H, C = 4, 8, 16, 3
SAMPLE, UNIT = 1, 5


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, H)
        self.fc2 = nn.Linear(H, C)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)


def manual_grads(model, x, y, flip):
    """The MLP's parameter gradients in float64 by hand; `flip` inverts the ReLU mask of
    (SAMPLE, UNIT)."""
    w1, b1 = model.fc1.weight.double().detach().numpy(), model.fc1.bias.double().detach().numpy()
    w2, b2 = model.fc2.weight.double().detach().numpy(), model.fc2.bias.double().detach().numpy()
    xs = x.double().numpy()
    pre = xs @ w1.T + b1
    mask = (pre > 0).astype(np.float64)
    if flip:
        mask[SAMPLE, UNIT] = 1 - mask[SAMPLE, UNIT]
    h = pre * (pre > 0)
    logits = h @ w2.T + b2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dlogits = (p - np.eye(C)[y.numpy()]) / N
    dh = dlogits @ w2
    dpre = dh * mask
    return {"fc1.weight": dpre.T @ xs, "fc1.bias": dpre.sum(0),
            "fc2.weight": dlogits.T @ h, "fc2.bias": dlogits.sum(0)}


def main():
    model = Mlp()
    inputs = {"x": torch.randn(N, D), "y": torch.randint(0, C, (N,))}
    # Put (SAMPLE, UNIT)'s pre-activation 1e-9 above the kink, in float64.
    with torch.no_grad():
        x64 = inputs["x"].double()[SAMPLE]
        pre = float(model.fc1.weight.double()[UNIT] @ x64 + model.fc1.bias.double()[UNIT])
        model.fc1.bias[UNIT] -= pre - 1e-9
    pre = float(model.fc1.weight.double()[UNIT] @ inputs["x"].double()[SAMPLE]
                + model.fc1.bias.double()[UNIT])
    assert 0 < pre < 1e-6, pre
    t64 = manual_grads(model, inputs["x"], inputs["y"], flip=False)
    flipped = manual_grads(model, inputs["x"], inputs["y"], flip=True)
    change = np.sqrt(sum(((flipped[k] - t64[k]) ** 2).sum() for k in t64)
                     / sum((t64[k] ** 2).sum() for k in t64))
    assert change > 1e-3, f"the flip moves the gradient by only {change:.3g}"

    err, flips = zoo_kinks.explain_model(model, inputs, flipped, t64)
    assert err is not None and err < 1e-7, err  # the mirror also moves it by 2e-9
    assert [(f["op"], f["element"]) for f in flips] == [("relu", SAMPLE * H + UNIT)], flips

    err, flips = zoo_kinks.explain_model(model, inputs, t64, t64)
    assert err < 1e-12 and flips == [], (err, flips)

    off = {k: v * (1 + 1e-2) for k, v in flipped.items()}
    err, _ = zoo_kinks.explain_model(model, inputs, off, t64)
    assert err > 5e-3, f"a gradient 1% off was explained by kinks ({err:.3g})"
    print(f"zoo_kinks: pass (the flip moves the gradient by {change:.3g} and is found)")


if __name__ == "__main__":
    main()
