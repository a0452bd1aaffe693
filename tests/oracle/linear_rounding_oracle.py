"""Linear layers in 16 bits round where PyTorch rounds (passes/linear_as_gemm.h).

torch.nn.Linear on inputs of rank 2, 3 and 4, and a Linear + ReLU on rank 2 (one module, four
outputs) is exported with torch.onnx.export (rank 2 as Gemm, ranks 3 and 4 as MatMul + Add; the
ReLU after a Gemm, which a bf16 CPU plan folds into the GEMM's epilogue: checked in bf16),
compiled by `ampc compile --precision P --target T` for a CUDA and a CPU target (inference
plans) and run by `ampc run`. Each output is compared, bit for bit, with

- bf16: PyTorch's own CPU autocast (torch.autocast("cpu", torch.bfloat16)) on the same
  module and inputs;
- fp16 (CPU autocast has no fp16 in this PyTorch): float64 arithmetic on the fp16-rounded
  operands, rounded as PyTorch's CUDA autocast rounds: once for ranks 2 and 3 (at::linear
  calls addmm on the rows: the bias joins the fp32 accumulator), twice for rank 4 (matmul,
  rounded, then add_).

ampc accumulates in fp32 where the references sum in another order (or in float64), so a
product within an fp32 rounding of a 16-bit rounding boundary may land on the other side:
at least MIN_EQUAL of each output's elements must be equal, and every other one within one
16-bit unit. The wrong model fails: rounding twice where PyTorch rounds once (what ampc did
before linear_as_gemm) matches 70-76% of a rank-2 or rank-3 output in either precision
(measured), which the script prints beside each result.

    /usr/bin/python3 tests/oracle/linear_rounding_oracle.py --ampc BIN --models-dir DIR
        --out DIR {bf16,fp16}
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_cli  # noqa: E402

MIN_EQUAL = 0.99
LOW = {"bf16": torch.bfloat16, "fp16": torch.float16}
OUTPUTS = ["y2", "y3", "y4", "r2"]


class Linears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l2 = torch.nn.Linear(64, 24)
        self.l3 = torch.nn.Linear(64, 48)
        self.l4 = torch.nn.Linear(64, 40)
        # Its own seed, so that the other layers' weights and the inputs drawn after them stay
        # what they were before it was added.
        with torch.random.fork_rng():
            torch.manual_seed(1)
            self.r2 = torch.nn.Linear(64, 32)

    def forward(self, x2, x3, x4):
        return self.l2(x2), self.l3(x3), self.l4(x4), torch.relu(self.r2(x2))


def rounded(t, low):
    return t.to(low).double()


def by_hand(module, inputs, low, once):
    """The float64 linear of the 16-bit operands, rounded to `low` once or twice."""
    out = []
    layers = (module.l2, module.l3, module.l4, module.r2)
    for layer, x in zip(layers, (*inputs, inputs[0])):
        w, b = rounded(layer.weight.detach(), low), rounded(layer.bias.detach(), low)
        product = rounded(x, low) @ w.t()
        y = (product + b if once else product.to(low).double() + b).to(low).double()
        out.append((torch.relu(y) if layer is module.r2 else y).float().numpy())
    return out


def torch_reference(module, inputs, precision):
    if precision == "bf16":
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return [y.float().numpy() for y in module(*inputs)]
    # CUDA autocast's rule: once for ranks 2 and 3, twice for rank 4.
    low = LOW[precision]
    once = by_hand(module, inputs, low, True)
    twice = by_hand(module, inputs, low, False)
    return [once[0], once[1], twice[2], once[3]]


def ulp_apart(a, b, precision):
    """Whether a and b (16-bit values held as float32) are at most one 16-bit unit apart:
    their bit patterns as points on one ordered line (sign-magnitude made monotone)."""
    def line(x):
        bits = torch.from_numpy(x).to(LOW[precision]).view(torch.int16).int()
        return torch.where(bits >= 0, bits, -(bits & 0x7FFF))
    return bool(((line(a) - line(b)).abs() <= 1).all())


def main():
    a = oracle_cli.parse_args(LOW)
    torch.manual_seed(0)
    module = Linears().eval()
    inputs = (torch.randn(32, 64), torch.randn(4, 16, 64), torch.randn(2, 3, 8, 64))
    names = ["x2", "x3", "x4"]
    model = os.path.join(a.out, "linears.onnx")
    torch.onnx.export(module, inputs, model, input_names=names, output_names=OUTPUTS,
                      opset_version=17)
    feeds = []
    for name, x in zip(names, inputs):
        path = os.path.join(a.out, name + ".npy")
        np.save(path, x.numpy())
        feeds += ["--input", f"{name}={path}"]
    want = torch_reference(module, inputs, a.precision)
    low = LOW[a.precision]
    wrong = by_hand(module, inputs, low, False)  # two roundings everywhere
    failed = []
    # Both targets' plans, on the CPU backend: they differ in what they fold (a CPU plan takes
    # the ReLU into a bf16 GEMM).
    for target in ("cuda:sm_90", "cpu"):
        plan = os.path.join(a.out, f"linears_{target.replace(':', '_')}.plan")
        oracle_cli.run([a.ampc, "compile", model, "--precision", a.precision, "--target", target,
                        "-o", plan])
        outs = os.path.join(a.out, "outputs_" + target.replace(":", "_"))
        oracle_cli.run([a.ampc, "run", plan, *feeds, "--output-dir", outs])
        for k, name in enumerate(OUTPUTS):
            # The ReLU folds only after a bf16 GEMM; in fp16 its by-hand reference, summed in
            # float64, differs by more than a unit from any fp32 sum where the products cancel
            # near 0, which the ReLU then keeps or zeroes.
            if name == "r2" and a.precision != "bf16":
                continue
            got = np.load(os.path.join(outs, name + ".npy"))
            equal = float((got == want[k]).mean())
            twice = float((want[k] == wrong[k]).mean())
            near = ulp_apart(got, want[k], a.precision)
            rank = 2 if name == "r2" else k + 2
            print(f"{a.precision} {target} {name} (input rank {rank}): {equal:.4f} of the "
                  f"elements equal PyTorch's (rounding twice would give {twice:.4f}); the rest "
                  f"within one unit: {near}")
            if equal < MIN_EQUAL or not near:
                failed.append(f"{name} ({target})")
    if failed:
        sys.exit(f"FAILED: {', '.join(failed)} do not round as PyTorch's linear does")
    print("ok")


if __name__ == "__main__":
    main()
