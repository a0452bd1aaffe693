"""Kinks within float32's noise: the second look run_zoo.py takes when a step-1 gradient is
further from PyTorch float64 than the standard allows.

ReLU, ReLU6 (hardtanh), Hardswish, Hardsigmoid and LeakyReLU have kinks: their gradient jumps
where the input crosses 0 (or -3, 3, ReLU6's 0 and 6). A float32 forward differs from float64
by a few ulps per element (`sigma` below: the RMS of |float32 - float64| of that tensor, as
PyTorch float32 computes it); an element whose float64 value lies within a few sigma of a kink
takes either side in a float32 implementation, at random, and which side it takes moves the
whole backward below it. One such element moved by 5e-6 makes an 8e-3 error of the parameter
gradients (wide_resnet_small: the last ReLU's element at +5.0e-6 with sigma 3.9e-6; mnasnet0_5
has one at 0.07 sigma). PyTorch float32 landing on float64's side there is luck, and so is any
other float32 implementation, so the standard (3 x PyTorch float32's error) says nothing there.

So when the plain check fails, `explain` finds every input within KINK_SIGMAS sigma of a kink
(the nearest MAX_FLIPS), and every 2-D max-pooling window whose two largest values are that
close (an exact tie stays a tie in float32: the first maximum wins in both), computes in
float64 the gradient with that input moved to the other side (an element mirrored across its
kink, x -> 2k - x, or the window's two largest values swapped: a move of float32's size), and
looks for the set of such moves whose float64 gradient is nearest ampc's. The check then
holds ampc to the same standard against that gradient: a float32 implementation may take
either side at these inputs, and nothing else.

Measured when the oneDNN backend came in (its convolutions round differently from the
im2col kernels, both within float32's usual error): PyTorch float32 itself, run with 2
threads instead of 1, is 8.3e-3 off float64 on wide_resnet_small and 1.3e-2 on mobilenet_v2,
where the standard from its 1-thread run is 1e-5 and 9.7e-5.
"""
import copy
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import zoo_models

KINK_SIGMAS = 4.0
MAX_FLIPS = 8


def arg(args, kwargs, i, name, default):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def kink_points(name, args, kwargs):
    """The kinks of a piecewise function's input (args[0]), or None for any other function."""
    if name in ("relu", "relu_", "leaky_relu", "leaky_relu_"):
        return [0.0]
    if name == "relu6":
        return [0.0, 6.0]
    if name in ("threshold", "threshold_"):
        return [float(arg(args, kwargs, 1, "threshold", 0.0))]
    if name in ("hardtanh", "hardtanh_"):
        return [float(arg(args, kwargs, 1, "min_val", -1.0)),
                float(arg(args, kwargs, 2, "max_val", 1.0))]
    if name in ("hardswish", "hardsigmoid"):
        return [-3.0, 3.0]
    return None


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def pool_top2(x, args, kwargs):
    """Per window of a 2-D max pooling of x: the largest value minus the second largest, and
    the flat indices of both (windows of padding only give nan)."""
    k = pair(arg(args, kwargs, 1, "kernel_size", None))
    s = arg(args, kwargs, 2, "stride", None)
    s = pair(s) if s else k
    p = pair(arg(args, kwargs, 3, "padding", 0))
    d = pair(arg(args, kwargs, 4, "dilation", 1))
    ceil = bool(arg(args, kwargs, 5, "ceil_mode", False))
    n, c, h, w = x.shape
    extra = (s[0], s[1]) if ceil else (0, 0)
    pad = (p[1], p[1] + extra[1], p[0], p[0] + extra[0])
    xs = F.pad(x.reshape(n * c, 1, h, w), pad, value=-math.inf)
    ids = F.pad(torch.arange(x.numel(), dtype=torch.float64).reshape(n * c, 1, h, w), pad,
                value=-1.0)
    u = F.unfold(xs, k, dilation=d, stride=s)
    ui = F.unfold(ids, k, dilation=d, stride=s)
    top = u.topk(2, dim=1)
    gap = top.values[:, 0] - top.values[:, 1]
    first = ui.gather(1, top.indices[:, :1]).squeeze(1)
    second = ui.gather(1, top.indices[:, 1:2]).squeeze(1)
    return gap.flatten(), first.flatten().long(), second.flatten().long()


class KinkMode(TorchFunctionMode):
    """Records the input of every piecewise function and 2-D max pooling (record=True), or
    moves one input across its kink (flip=(call, what)): an element mirrored across its
    nearest kink (what: flat index) or a pooling window's two largest values swapped (what:
    their flat indices). The move is made on the data before the function runs, so autograd
    saves the moved input as it would a float32 one."""

    def __init__(self, record=False, flip=None):
        super().__init__()
        self.record = record
        self.flip = flip
        self.calls = 0
        self.seen = []  # (kind, input as float64, kinks or the pooling's (args, kwargs))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        kinks = kink_points(name, args, kwargs)
        pool = name in ("max_pool2d", "_max_pool2d") and args and args[0].dim() == 4
        if (kinks is not None or pool) and args and isinstance(args[0], torch.Tensor):
            call = self.calls
            self.calls += 1
            x = args[0]
            if self.record:
                extra = kinks if kinks is not None else (args, kwargs)
                self.seen.append(("max_pool2d" if pool else name, x.detach().double().clone(),
                                  extra))
            if self.flip and self.flip[0] == call:
                with torch.no_grad():
                    data = x.data
                    if pool:
                        i, j = (np.unravel_index(e, tuple(x.shape)) for e in self.flip[1])
                        vi, vj = float(data[i]), float(data[j])
                        data[i], data[j] = vj, vi
                    else:
                        idx = np.unravel_index(self.flip[1], tuple(x.shape))
                        v = float(data[idx])
                        data[idx] = 2 * min(kinks, key=lambda q: abs(v - q)) - v
        return func(*args, **kwargs)


def run(model, inputs, dtype, mode):
    m = copy.deepcopy(model).to(dtype)
    m.train()
    a = [t.to(dtype) if t.is_floating_point() else t for t in inputs.values()]
    with mode:
        loss = m(*a)
    loss.backward()
    return {n: p.grad.detach().double().numpy() for n, p in m.named_parameters()
            if p.grad is not None}


def candidates(model, inputs):
    """Inputs within KINK_SIGMAS sigma of a kink: (distance / sigma, call, what, kind,
    distance, sigma), nearest first, at most MAX_FLIPS. sigma is the RMS of |float32 -
    float64| over the function's input (over the windows' gaps for max pooling)."""
    r64, r32 = KinkMode(record=True), KinkMode(record=True)
    run(model, inputs, torch.float64, r64)
    run(model, inputs, torch.float32, r32)
    if len(r64.seen) != len(r32.seen):
        return []
    out = []
    for call, ((kind, x64, extra), (_, x32, _)) in enumerate(zip(r64.seen, r32.seen)):
        if kind == "max_pool2d":
            gap64, first, second = pool_top2(x64, *extra)
            gap32, _, _ = pool_top2(x32, *extra)
            ok = torch.isfinite(gap64) & torch.isfinite(gap32)
            sigma = float((gap32[ok] - gap64[ok]).pow(2).mean().sqrt()) if ok.any() else 0.0
            # An exact tie stays a tie in float32 (the first maximum wins in both).
            near = ok & (gap64 > 0) & (gap64 < KINK_SIGMAS * sigma)
            for j in torch.nonzero(near).flatten().tolist():
                d = float(gap64[j])
                out.append((d / sigma, call, (int(first[j]), int(second[j])), kind, d, sigma))
            continue
        sigma = float((x32 - x64).pow(2).mean().sqrt())
        if sigma == 0:
            continue
        dist = torch.stack([(x64 - k).abs() for k in extra]).min(0).values.flatten()
        for j in torch.nonzero(dist < KINK_SIGMAS * sigma).flatten().tolist():
            d = float(dist[j])
            out.append((d / sigma, call, j, kind, d, sigma))
    out.sort(key=lambda c: c[0])
    unique = {}
    for c in out:  # overlapping pooling windows share their two largest values
        unique.setdefault((c[1], c[2]), c)
    return list(unique.values())[:MAX_FLIPS]


def flat(grads, keys):
    return np.concatenate([grads[k].astype(np.float64).ravel() for k in keys])


def explain(name, ours, t64):
    """explain_model for the zoo model `name` (built as zoo_export.py builds it)."""
    torch.set_num_threads(1)  # as zoo_export.py computes grad64
    model, inputs, _ = zoo_models.build(name)
    return explain_model(model, inputs, ours, t64)


def explain_model(model, inputs, ours, t64):
    """The set of float32-plausible kink flips whose float64 gradient is nearest `ours`
    (dicts parameter -> gradient; t64: float64's): (relative error against it, [the flips]);
    (None, []) when no input is near a kink."""
    found = candidates(model, inputs)
    if not found:
        return None, []
    keys = sorted(t64)
    base = flat(run(model, inputs, torch.float64, KinkMode()), keys)
    want = flat(t64, keys)
    residual = flat(ours, keys) - want
    deltas = [flat(run(model, inputs, torch.float64, KinkMode(flip=(c[1], c[2]))), keys) - base
              for c in found]
    # |residual - sum of the chosen deltas|^2 for every subset, from inner products.
    gram = np.array([[float(a @ b) for b in deltas] for a in deltas])
    lin = np.array([float(residual @ d) for d in deltas])
    rr = float(residual @ residual)
    best, best_set = rr, ()
    for size in range(1, len(found) + 1):
        for s in itertools.combinations(range(len(found)), size):
            idx = list(s)
            e = rr - 2 * lin[idx].sum() + gram[np.ix_(idx, idx)].sum()
            if e < best:
                best, best_set = e, s
    den = float(want @ want)
    err = math.sqrt(max(best, 0.0) / den) if den > 0 else math.sqrt(max(best, 0.0))
    used = [{"call": found[i][1], "op": found[i][3], "element": found[i][2],
             "distance": found[i][4], "sigma": found[i][5]} for i in best_set]
    return err, used
