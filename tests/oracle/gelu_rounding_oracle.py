"""torch's GELU in 16 bits rounds where PyTorch rounds (passes/erf_gelu.h, passes/autocast.cc).

torch 1.13 exports nn.GELU() as five nodes (Div by sqrt(2), Erf, Add 1, Mul by x, Mul by 0.5);
PyTorch computes gelu, and its backward, as one op: in fp32, rounded once to the input's type.
The module is h = Linear(x) (the weight the identity, the bias zero, so h is the 16-bit x
exactly), y = GELU(h), exported with torch.onnx.export and run by ampc:

- forward: `ampc compile --precision P --target T` (inference plans for a CUDA and a CPU
  target) and `ampc run`; y against PyTorch's y;
- backward: loss = sum(GELU(h) * c) on one row, one step of `ampc train --optimizer sgd --lr 1`
  from the zero bias: the bias after the step is -dL/db = -dL/dh, the GELU's backward output
  as the plan rounds it (0 - g is exact in fp32, and the unscale of fp16 a power of two),
  against PyTorch's dL/dh.

References: bf16, PyTorch's own CPU autocast (its gelu and gelu_backward run in bf16); fp16
(CPU autocast has no fp16 in this PyTorch), PyTorch's fp32 gelu and gelu_backward of the
fp16 operands, rounded once to fp16 as CUDA's kernels do (for the backward at ampc's loss
scale, 2^16, then divided by it).

PyTorch's fp32 erf and ampc's differ by a few fp32 units, which decides the 16-bit rounding of
an element near a rounding boundary: at least MIN_EQUAL of the elements must be equal and every
other one within one 16-bit unit, or, where the fp32 formula itself cancels (1 + erf(x /
sqrt(2)) for x below about -3, so both sides' fp32 results are a few 16-bit units from the exact
gelu there; gelu's derivative near its root at -0.75), within FP32_ERRORS fp32 roundings of the
terms the formula adds: |x| forward, |dy| (1 + |x|) backward. The wrong model fails: rounding
after each of the five ops (what ampc did before) matches about half the elements (measured),
which the script prints beside each result.

    /usr/bin/python3 tests/oracle/gelu_rounding_oracle.py --ampc BIN --models-dir DIR
        --out DIR {bf16,fp16}
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_cli  # noqa: E402

MIN_EQUAL = 0.99
U32 = 2.0 ** -24  # fp32's unit roundoff
FP32_ERRORS = 4   # fp32 roundings in the formula's terms, each of at most U32 times the term
LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}
SCALE = {"bf16": 1.0, "fp16": 65536.0}  # ampc's initial loss scale
WIDTH = 2048  # features: the gradient's elements
ROWS = 16     # rows of the forward


class GeluBlock(torch.nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.lin = torch.nn.Linear(WIDTH, WIDTH)
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(WIDTH))
            self.lin.bias.zero_()
        self.gelu = torch.nn.GELU()
        self.loss = loss

    def forward(self, x, c=None):
        y = self.gelu(self.lin(x))
        return (y * c).sum() if self.loss else y


def line(t, low):
    """16-bit values as points on one ordered line (sign-magnitude made monotone)."""
    bits = t.to(low).view(torch.int16).int()
    return torch.where(bits >= 0, bits, -(bits & 0x7FFF))


def compare(label, x, got, want, per_op, low, slack):
    """`slack`: per element, the error the fp32 formula itself may make (cancellation)."""
    apart = (line(got, low) - line(want, low)).abs().reshape(-1)
    near = (apart <= 1) | ((got - want).abs().reshape(-1) <= slack.reshape(-1))
    equal = float((apart == 0).float().mean())
    wrong = float((line(per_op, low) == line(want, low)).float().mean())
    print(f"{label}: {equal:.4f} of the elements equal PyTorch's (a rounding after each op "
          f"would give {wrong:.4f}); the rest within one unit or the fp32 formula's error: "
          f"{bool(near.all())}")
    for i in torch.nonzero(~near).reshape(-1)[:5].tolist():
        print(f"  x = {x.reshape(-1)[i].item():.6g}: ampc {got.reshape(-1)[i].item():.6g}, "
              f"PyTorch {want.reshape(-1)[i].item():.6g}, {int(apart[i])} units apart")
    return equal >= MIN_EQUAL and bool(near.all())


def rounding(low):
    """A stored 16-bit value held as float32: rounded to `low` forward, and its gradient
    rounded backward."""
    class Round(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.to(low).float()

        @staticmethod
        def backward(ctx, g):
            return g.to(low).float()
    return Round.apply


def per_op_gelu(h, low):
    """The five exported ops on the 16-bit h (held as float32), each result rounded to `low`
    (the constants cast as autocast casts a one-element constant), through autograd for the
    backward, whose ops round too."""
    r = rounding(low)
    c = lambda v: torch.tensor(v).to(low).float()  # noqa: E731
    return r(r(h * r(r(torch.erf(r(h / c(math.sqrt(2.0))))) + c(1.0))) * c(0.5))


def reference_forward(x, low, precision):
    module = GeluBlock(loss=False)
    if precision == "bf16":
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return module(x).float()
    h = x.to(low)  # the GEMM's output: x exactly
    return torch.nn.functional.gelu(h.float()).to(low).float()


def reference_gradient(x, c, low, precision):
    """dL/dh of one row, as PyTorch rounds it."""
    if precision == "bf16":
        module = GeluBlock(loss=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = module(x, c)
        loss.backward()
        return module.lin.bias.grad.float()
    h = x.to(low).float().requires_grad_()
    dy = (c * SCALE[precision]).to(low).float()  # the scaled loss's gradient, rounded
    torch.nn.functional.gelu(h).backward(dy)
    return (h.grad.to(low).float() / SCALE[precision])


def per_op_gradient(x, c, low, precision):
    h = x.clone().requires_grad_()
    per_op_gelu(h, low).backward((c * SCALE[precision]).to(low).float())
    return h.grad.to(low).float() / SCALE[precision]


def check_forward(a, low):
    x = (torch.randn(ROWS, WIDTH) * 1.5).to(low).float()
    model = os.path.join(a.out, "gelu.onnx")
    torch.onnx.export(GeluBlock(loss=False), (x,), model, input_names=["x"], output_names=["y"],
                      opset_version=17)
    np.save(os.path.join(a.out, "x.npy"), x.numpy())
    want = reference_forward(x, low, a.precision)
    per_op = per_op_gelu(x, low)
    ok = True
    for target in ("cuda:sm_90", "cpu"):
        tag = target.replace(":", "_")
        plan = os.path.join(a.out, f"gelu_{tag}.plan")
        oracle_cli.run([a.ampc, "compile", model, "--precision", a.precision, "--target", target,
                        "-o", plan])
        outs = os.path.join(a.out, "y_" + tag)
        oracle_cli.run([a.ampc, "run", plan, "--input", "x=" + os.path.join(a.out, "x.npy"),
                        "--output-dir", outs])
        got = torch.from_numpy(np.load(os.path.join(outs, "y.npy")))
        ok &= compare(f"{a.precision} forward ({target})", x, got, want, per_op, low,
                      FP32_ERRORS * U32 * x.abs())
    return ok


def check_gradient(a, low):
    x = (torch.randn(1, WIDTH) * 1.5).to(low).float()
    # |c| * 2^16 keeps the scaled weight gradient (dh times x) finite in fp16.
    c = (torch.randn(1, WIDTH) * 0.01).to(low).float()
    state = oracle_cli.one_sgd_step(a, GeluBlock(loss=True), {"x": x, "c": c}, "gelu_loss",
                                    ["--precision", a.precision])
    got = -torch.from_numpy(state["lin.bias"].astype(np.float32))
    want = reference_gradient(x, c, low, a.precision).reshape(-1)
    per_op = per_op_gradient(x, c, low, a.precision).reshape(-1)
    slack = FP32_ERRORS * U32 * c.abs() * (1 + x.abs())
    return compare(f"{a.precision} backward (cpu)", x, got, want, per_op, low, slack)


def main():
    a = oracle_cli.parse_args(LOW)
    torch.manual_seed(0)
    low = LOW[a.precision]
    ok = check_forward(a, low)
    ok &= check_gradient(a, low)
    if not ok:
        sys.exit(f"FAILED: {a.precision} GELU does not round as PyTorch's gelu does")
    print("ok")


if __name__ == "__main__":
    main()
