"""Pow by a constant 1, 2, 3, -1, -2, 0.5 and -0.5 computes PyTorch's bits (passes/scalar_powers.h).

PyTorch computes a tensor to those powers by products, reciprocals and square roots (x * x * x,
1 / (x * x), sqrt, 1 / sqrt), not by pow, forward and in pow's backward (exponent * x^(exponent
- 1), whose powers are such cases again). A module computing x ** p for each p, exported with
torch.onnx.export and run by ampc:

- forward: `ampc compile --target cpu` and `ampc run` (a fused kernel, the host JIT), every
  result against PyTorch's float32 bit for bit, on values of every magnitude and the special
  ones (+-0, +-inf, NaN, subnormals);
- backward: loss = sum_p sum((x + b_p) ** p * c_p) on one row, one step of `ampc train
  --optimizer sgd --lr 1` from zero biases: b_p after the step is -dL/db_p = -dL/dx, bit for
  bit against PyTorch's autograd where p - 1 is such a case too (0, 1, 2, -2, -0.5); x^-3 and
  x^-1.5 (the gradients of x^-2 and x^-0.5) are pows on both sides, the C library's and
  PyTorch's vectorised one (Sleef's, within one unit), so those within ULPS units.

The wrong model fails: the C library's powf (what ampc computed before) differs from PyTorch's
in a share of the elements of most of these powers (the cubes, the reciprocal square roots; the
square roots at -0 and -inf), which the script prints beside each result.

    /usr/bin/python3 tests/oracle/pow_scalar_oracle.py --ampc BIN --models-dir DIR --out DIR fp32
"""
import ctypes
import ctypes.util
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_cli  # noqa: E402

EXPONENTS = {"p1": 1.0, "p2": 2.0, "p3": 3.0, "pm1": -1.0, "pm2": -2.0, "ph": 0.5, "pmh": -0.5}
WIDTH = 4096
ULPS = 2  # a pow one unit apart, times p and c
LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
LIBM.powf.restype = ctypes.c_float
LIBM.powf.argtypes = [ctypes.c_float, ctypes.c_float]


def powf(x, p):
    """The C library's powf elementwise (what a Pow computed before: the CPU op and the JIT)."""
    flat = x.reshape(-1).tolist()
    return torch.tensor([LIBM.powf(v, p) for v in flat], dtype=torch.float32).reshape(x.shape)


class Powers(torch.nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.loss = loss
        self.b = torch.nn.ParameterDict(
            {k: torch.nn.Parameter(torch.zeros(WIDTH)) for k in EXPONENTS})

    def forward(self, x, c=None):
        if not self.loss:
            return tuple(x ** p for p in EXPONENTS.values())
        return sum(((x + self.b[k]) ** p * c[:, i]).sum()
                   for i, (k, p) in enumerate(EXPONENTS.items()))


def same_bits(got, want):
    """Elementwise: equal bits, or both NaN."""
    return (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())


def units_apart(a, b):
    """float32 values as points on one ordered line (sign-magnitude made monotone)."""
    line = lambda t: torch.where(t.view(torch.int32) >= 0, t.view(torch.int32).long(),  # noqa
                                 -(t.view(torch.int32).long() & 0x7FFFFFFF))
    return (line(a) - line(b)).abs()


def report(label, got, want, powf, ulps=0):
    equal = same_bits(got, want) | (units_apart(got, want) <= ulps)
    apart = int((~same_bits(powf, want)).sum())
    what = "PyTorch's bits" if ulps == 0 else f"within {ulps} units of PyTorch's"
    print(f"{label}: {int(equal.sum())} / {equal.numel()} elements {what} "
          f"(the C library's powf: {apart} elements differ)")
    for i in torch.nonzero(~equal).reshape(-1)[:5].tolist():
        print(f"  element {i}: ampc {got[i].item()!r}, PyTorch {want[i].item()!r}")
    return bool(equal.all())


def forward_input():
    g = torch.Generator().manual_seed(0)
    mags = torch.exp2(torch.randint(-140, 120, (WIDTH,), generator=g).float())
    x = (torch.rand(WIDTH, generator=g) + 0.5) * mags * torch.where(
        torch.rand(WIDTH, generator=g) < 0.3, -1.0, 1.0)
    x[:3000] = torch.rand(3000, generator=g) * 4 - 1  # the common range, cubes rounding twice
    specials = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45, 1.0]
    x[-len(specials):] = torch.tensor(specials)
    return x.reshape(1, WIDTH)


def check_forward(a):
    x = forward_input()
    model = os.path.join(a.out, "powers.onnx")
    names = list(EXPONENTS)
    torch.onnx.export(Powers(loss=False), (x,), model, input_names=["x"], output_names=names,
                      opset_version=17)
    np.save(os.path.join(a.out, "x.npy"), x.numpy())
    plan = os.path.join(a.out, "powers.plan")
    oracle_cli.run([a.ampc, "compile", model, "--target", "cpu", "-o", plan])
    outs = os.path.join(a.out, "y")
    oracle_cli.run([a.ampc, "run", plan, "--input", "x=" + os.path.join(a.out, "x.npy"),
                    "--output-dir", outs])
    ok = True
    for k, p in EXPONENTS.items():
        got = torch.from_numpy(np.load(os.path.join(outs, k + ".npy"))).reshape(-1)
        want = (x ** p).reshape(-1)
        ok &= report(f"forward x ** {p}", got, want, powf(x, p).reshape(-1))
    return ok


def check_gradient(a):
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, WIDTH, generator=g) * 4 + 0.25  # positive: every power finite
    c = torch.randn(1, len(EXPONENTS), WIDTH, generator=g)  # one row, as x
    state = oracle_cli.one_sgd_step(a, Powers(loss=True), {"x": x, "c": c}, "powers_loss")
    ref = Powers(loss=True)
    ref(x, c).backward()
    ok = True
    for i, (k, p) in enumerate(EXPONENTS.items()):
        got = -torch.from_numpy(state["b." + k].astype(np.float32))
        # pow's backward with the C library's pow: c * (p * powf(x, p - 1)).
        with_powf = c[:, i] * (p * powf(x, p - 1))
        ulps = 0 if p - 1 in EXPONENTS.values() or p == 1 else ULPS
        ok &= report(f"backward of x ** {p}", got, ref.b[k].grad, with_powf.reshape(-1), ulps)
    return ok


def main():
    a = oracle_cli.parse_args({"fp32": None})
    ok = check_forward(a)
    ok &= check_gradient(a)
    if not ok:
        sys.exit("FAILED: ampc's powers are not PyTorch's")
    print("ok")


if __name__ == "__main__":
    main()
