"""bf16 training of the layers whose ONNX schemas up to opset 17 have no bfloat16
(ConvTranspose, HardSigmoid, HardSwish, ELU, CELU, SELU, Softsign): autocast writes their
`ampc.` forms (ops/ampc_forms.h), which compute in bf16 as PyTorch's autocast runs them.

The oracle is PyTorch in float64. One SGD step's update (-lr times the gradient, read from the
parameters ampc hands back) of every parameter, norm-wise over all of them, is compared with
float64's; the bound is 2.5x the error of PyTorch's own bf16 autocast on the same step (on the
CPU; its ConvTranspose done by hand as CUDA autocast runs it), or u / 4 (u = 2^-8, bf16's unit
roundoff) where PyTorch's error is smaller. Measured: decoder 1.44e-2 against PyTorch's 9.7e-3,
mlp 5.2e-3 against 5.5e-3. A form that computed in fp32 would not fail this (its error would be
smaller); one that dropped an attribute would: torch exports HardSigmoid with alpha 1/6, and
ONNX's default 0.2 moves the decoder's update by 3.0e-2 (HardSwish's slope at 0.2 by 1.3e-1).
The loss is a regression's mean squared error, whose gradient does not cancel across classes
as a cross-entropy's sums of scores would (that leaves relative errors of several u in the
biases' updates on both sides). The precision report says which form ran."""

import copy

import pytest
import torch
import torch.nn as nn

import ampc

U = 2.0 ** -8
LR = 0.5


class Regression(nn.Module):
    """Mean squared error of body(x) against y."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x, y):
        return nn.functional.mse_loss(self.body(x), y)


def decoder():
    """A strided Conv down, ConvTranspose back up, a squeeze-excite-like HardSigmoid gate."""

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.up = nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1)
            self.gate = nn.Conv2d(6, 6, 1)
            self.act = nn.Sequential(nn.CELU(0.5), nn.ELU(0.7))

        def forward(self, x):
            h = nn.functional.hardswish(self.down(x))
            if torch.is_autocast_cpu_enabled():
                # torch 1.13's CPU autocast runs conv_transpose2d in fp32, and its bf16 CPU
                # kernel fails; CUDA autocast (and amp-semantics.md) run it in the low dtype:
                # fp32 math on bf16 operands, the result rounded once to bf16, done by hand.
                with torch.autocast("cpu", enabled=False):
                    low = [t.bfloat16().float() for t in (h, self.up.weight, self.up.bias)]
                    h = nn.functional.conv_transpose2d(*low, stride=2, padding=1).bfloat16()
            else:
                h = self.up(h)
            return self.act(h * nn.functional.hardsigmoid(self.gate(h)))

    # Inputs of 3 standard deviations reach the activations' kinks and flat parts.
    return Body(), 3 * torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def mlp():
    body = nn.Sequential(nn.Linear(12, 24), nn.SELU(), nn.Linear(24, 24), nn.Softsign(),
                         nn.Linear(24, 24), nn.Hardswish(), nn.Linear(24, 9))
    return body, torch.randn(16, 12, generator=torch.Generator().manual_seed(2))


def update(net, batch, dtype):
    """Every parameter's change after one SGD step of PyTorch in `dtype` (float64, or float32
    under CPU bf16 autocast), flattened into one vector."""
    net = copy.deepcopy(net)
    if dtype == torch.float64:
        net = net.double()
        batch = {k: v.double() if v.is_floating_point() else v for k, v in batch.items()}
    before = [p.detach().clone() for p in net.parameters()]
    sgd = torch.optim.SGD(net.parameters(), lr=LR)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        loss = net(**batch)
    loss.backward()
    sgd.step()
    return torch.cat([(p.detach() - b).double().flatten() for p, b in zip(net.parameters(), before)])


def ampc_update(net, batch):
    trainer = ampc.compile(copy.deepcopy(net), batch, precision="bf16", optimizer="sgd", lr=LR)
    trainer.step(**batch)
    trained = copy.deepcopy(net)
    trainer.copy_to(trained)
    return torch.cat([(p.detach() - b.detach()).double().flatten()
                      for p, b in zip(trained.parameters(), net.parameters())])


@pytest.mark.parametrize("make", [decoder, mlp], ids=["decoder", "mlp"])
def test_bf16_forms_train_as_pytorch_autocast(make):
    torch.manual_seed(0)
    body, x = make()
    with torch.no_grad():
        shape = body(x).shape
    net = Regression(body)
    batch = {"x": x, "y": torch.randn(shape, generator=torch.Generator().manual_seed(3))}

    report = ampc.precision_report(net, batch, precision="bf16")
    forms = {n["op"] for n in report["nodes"] if n["node"].endswith("(ampc.%s)" % n["op"])}
    for n in report["nodes"]:
        if n["op"] in {"ConvTranspose", "HardSigmoid", "HardSwish", "Elu", "Celu", "Selu",
                       "Softsign"}:
            assert n["compute_dtype"] == "bf16", n
            assert n["op"] in forms, n
    assert forms, "no ampc form in the bf16 plan"

    want = update(net, batch, torch.float64)
    rel = lambda got: ((got - want).norm() / want.norm()).item()  # noqa: E731
    torch_error = rel(update(net, batch, torch.bfloat16))
    ours = rel(ampc_update(net, batch))
    assert ours <= max(2.5 * torch_error, U / 4), (ours, torch_error)
