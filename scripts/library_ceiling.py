"""The bf16 / fp32 time ratio the CPU libraries reach on a model's own GEMMs and convolutions.

For every MatMul, Gemm and Conv node of an exported ONNX graph, PyTorch (whose CPU kernels for
these are oneDNN's, the library ampc's CPU backend calls) runs the node's forward and backward
(gradients of both operands) on random data of the node's shapes, in fp32 and in bf16. The
sums of the medians give the time the model's heaviest work takes in each precision when
nothing else runs: their ratio bounds what a training step built on these kernels can reach
(bench_cpu.py prints it beside the measured step-time ratios). Biases, epilogues and every
other op are left out.
"""
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F


def _shapes(model):
    g = model.graph
    shapes = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for t in g.initializer:
        shapes[t.name] = list(t.dims)
    return shapes


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return list(a.ints) if a.ints else a.i
    return default


def _problem(node, shapes):
    """(operand shapes, function of the two operands) for a node, or None."""
    a, b = shapes.get(node.input[0]), shapes.get(node.input[1])
    if not a or not b or 0 in a or 0 in b:
        return None
    if node.op_type == "MatMul":
        return a, b, torch.matmul
    if node.op_type == "Gemm":
        ta, tb = _attr(node, "transA", 0), _attr(node, "transB", 0)
        return a, b, lambda x, w: (x.t() if ta else x) @ (w.t() if tb else w)
    if node.op_type == "Conv":
        dims = len(a) - 2
        if dims not in (1, 2, 3):
            return None
        conv = (F.conv1d, F.conv2d, F.conv3d)[dims - 1]
        pads = _attr(node, "pads", [0] * 2 * dims)
        kw = dict(stride=_attr(node, "strides", [1] * dims),
                  padding=pads[:dims], dilation=_attr(node, "dilations", [1] * dims),
                  groups=_attr(node, "group", 1))
        if pads[:dims] != pads[dims:]:
            return None  # asymmetric padding: not a single torch call
        return a, b, lambda x, w: conv(x, w, **kw)
    return None


def _median_ms(fn, reps):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def _forward_backward_ms(a_shape, b_shape, f, dtype, reps):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(a_shape, generator=g).to(dtype).requires_grad_()
    b = torch.randn(b_shape, generator=g).to(dtype).requires_grad_()
    with torch.no_grad():
        dy = torch.randn(f(a, b).shape, generator=g).to(dtype)

    def step():
        a.grad = b.grad = None
        f(a, b).backward(dy)

    return _median_ms(step, reps)


def ceiling(onnx_path, threads, reps=5):
    """(fp32 ms, bf16 ms): forward + backward of every MatMul, Gemm and Conv of the graph."""
    torch.set_num_threads(threads)
    model = onnx.shape_inference.infer_shapes(onnx.load(onnx_path), data_prop=True)
    shapes = _shapes(model)
    total = {torch.float32: 0.0, torch.bfloat16: 0.0}
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm", "Conv"):
            continue
        problem = _problem(node, shapes)
        if problem is None:
            continue
        for dtype in total:
            total[dtype] += _forward_backward_ms(*problem, dtype, reps)
    return total[torch.float32], total[torch.bfloat16]
