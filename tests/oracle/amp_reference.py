"""16-bit PyTorch references for one training step, made outside ampc.

- fp16: what CUDA autocast does, done by hand on the CPU (torch 1.13 has no fp16 GEMM on
  the CPU): the ALLOW ops of docs/mixed-precision.md / amp-semantics.md section 2 (here
  F.linear and torch.matmul, the only ones mlp and gpt use) take fp16 copies of their float
  inputs (weights, bias, activations), multiply them in fp32 (products of fp16 values are
  exact in fp32, the sum accumulates in fp32 as cuBLAS's CUBLAS_COMPUTE_32F does) and store
  an fp16 result (rounded once); every other op runs in fp32. Autograd goes through the
  roundings: the backward of `x.half().float()` rounds the gradient to fp16, which is what
  the fp16 GEMM's backward stores.
- bf16: PyTorch's own CPU autocast, torch.autocast(device_type="cpu", dtype=bfloat16),
  with one repair: torch 1.13's CPU autocast has no rule for layer_norm and fails on a bf16
  input with fp32 weights, so layer_norm gets an fp32 input, as CUDA autocast's fp32 list
  (and ampc's DENY class) has it. Its policy is otherwise not ampc's (softmax and gelu run
  in bf16 on the CPU where ampc keeps Softmax in fp32), so the two differ by more roundings
  than the fp16 pair; the bound in sixteen_bit_oracle.py says how much.

Both use GradScaler's recipe: the backward starts from loss * scale, every gradient is
then multiplied by fp32(1 / scale), found_inf is "any gradient not finite".
"""
import contextlib
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_forward_oracle as fwd  # noqa: E402

_LINEAR = F.linear
_MATMUL = torch.matmul


def round_to(t, dtype):
    """t rounded to `dtype` (round to nearest even) and back to t's dtype, with autograd."""
    return t.to(dtype).to(t.dtype) if t is not None else None


@contextlib.contextmanager
def fp16_allow_ops():
    """F.linear and torch.matmul as CUDA autocast runs them in fp16 (see the module doc)."""
    h = torch.float16

    def linear(x, w, b=None):
        return round_to(_LINEAR(round_to(x, h), round_to(w, h), round_to(b, h)), h)

    def matmul(a, b):
        return round_to(_MATMUL(round_to(a, h), round_to(b, h)), h)

    F.linear, torch.matmul = linear, matmul
    try:
        yield
    finally:
        F.linear, torch.matmul = _LINEAR, _MATMUL


@contextlib.contextmanager
def bf16_cpu_autocast():
    """torch.autocast(device_type="cpu", dtype=bfloat16), with layer_norm in fp32.

    torch 1.13's CPU autocast has no rule for layer_norm and refuses a bf16 input with fp32
    weights; CUDA autocast (and ampc's DENY class) run it in fp32, so its input is cast up."""
    layer_norm = fwd.layer_norm
    fwd.layer_norm = lambda p, prefix, x: layer_norm(p, prefix, x.float())
    try:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            yield
    finally:
        fwd.layer_norm = layer_norm


def precision_context(precision):
    if precision == "fp16":
        return fp16_allow_ops()
    if precision == "bf16":
        return bf16_cpu_autocast()
    if precision == "fp32":
        return contextlib.nullcontext()
    raise ValueError(precision)


def scaled_step_gradients(name, p, trainable, inputs, precision, scale):
    """Loss (float) and the unscaled gradients of one step, GradScaler's way.

    Returns (loss, found_inf). The gradients are left in each parameter's .grad, unscaled."""
    for v in trainable.values():
        v.grad = None
    with precision_context(precision):
        loss = fwd.LOSS[name](p, *inputs)
    (loss.float() * scale).backward()
    inv = torch.tensor(1.0 / float(scale), dtype=torch.float64).to(torch.float32)
    found_inf = False
    for v in trainable.values():
        if v.grad is None:
            continue
        found_inf |= not bool(torch.isfinite(v.grad).all())
        v.grad.mul_(inv.to(v.grad.dtype))
    return float(loss), found_inf
