"""The bf16 / fp32 time ratio oneDNN reaches on a model's own GEMMs and convolutions.

For every MatMul, Gemm, Conv and ConvTranspose node of an exported ONNX graph (shapes from
ONNX's shape inference), tools/dnnl_ceiling runs the node's forward and both backward passes
through oneDNN 2.6, the library ampc's CPU backend calls, in fp32 and in bf16 (bf16 operands and
results, fp32 accumulation), the two precisions taking turns, and sums the fastest repetition of
each (see that tool's comment for why the fastest). Those sums are the time the model's heaviest
work takes in each precision when nothing else runs: their ratio bounds what a training step
built on this library can reach (bench_cpu.py prints it beside the measured step-time ratios).
Biases, epilogues and every other op are left out.
"""
import json
import math
import os
import subprocess

import onnx


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


def _matmul(a, b):
    """A MatMul of a [..., M, K] and b [..., K, N]: batched where both have the same leading
    dimensions, the leading dimensions folded into M where b is a matrix; None otherwise."""
    if len(a) < 2 or len(b) < 2:
        return None
    lead_a, lead_b = a[:-2], b[:-2]
    if math.prod(lead_b) == 1:
        return {"kind": "matmul", "batch": 1, "m": math.prod(a[:-1]), "k": a[-1], "n": b[-1]}
    if lead_a == lead_b:
        return {"kind": "matmul", "batch": math.prod(lead_a), "m": a[-2], "k": a[-1], "n": b[-1]}
    return None


def _problem(node, shapes):
    """The tool's description of a node's problem, or None."""
    a, b = shapes.get(node.input[0]), shapes.get(node.input[1])
    if not a or not b or 0 in a or 0 in b:
        return None
    if node.op_type == "MatMul":
        return _matmul(a, b)
    if node.op_type == "Gemm":
        ta, tb = _attr(node, "transA", 0), _attr(node, "transB", 0)
        m, k = (a[1], a[0]) if ta else (a[0], a[1])
        n = b[0] if tb else b[1]
        return {"kind": "matmul", "batch": 1, "m": m, "k": k, "n": n}
    if node.op_type == "Conv":
        dims = len(a) - 2
        if dims not in (1, 2, 3):
            return None
        pads = _attr(node, "pads", [0] * 2 * dims)
        return {"kind": "conv", "n": a[0], "c": a[1], "m": b[0], "group": _attr(node, "group", 1),
                "image": a[2:], "kernel": b[2:], "stride": _attr(node, "strides", [1] * dims),
                "dilation": _attr(node, "dilations", [1] * dims), "pad_l": pads[:dims],
                "pad_r": pads[dims:]}
    if node.op_type == "ConvTranspose":
        # The backward-data pass of the convolution it transposes, from Y to X: the same three
        # passes (its forward that convolution's backward data, its dX that convolution).
        y = shapes.get(node.output[0])
        dims = len(a) - 2
        if not y or 0 in y or dims not in (1, 2, 3) or _attr(node, "output_shape", None):
            return None
        pads = _attr(node, "pads", [0] * 2 * dims)
        out_pad = _attr(node, "output_padding", [0] * dims)
        return {"kind": "conv", "n": a[0], "c": y[1], "m": a[1], "group": _attr(node, "group", 1),
                "image": y[2:], "kernel": b[2:], "stride": _attr(node, "strides", [1] * dims),
                "dilation": _attr(node, "dilations", [1] * dims), "pad_l": pads[:dims],
                "pad_r": [max(e - o, 0) for e, o in zip(pads[dims:], out_pad)]}
    return None


def problems(onnx_path):
    """The tool's problems for every MatMul, Gemm, Conv and ConvTranspose of the graph whose
    shapes are known."""
    model = onnx.shape_inference.infer_shapes(onnx.load(onnx_path), data_prop=True)
    shapes = _shapes(model)
    found = (_problem(n, shapes) for n in model.graph.node
             if n.op_type in ("MatMul", "Gemm", "Conv", "ConvTranspose"))
    return [p for p in found if p is not None]


def ceiling(onnx_path, tool, env):
    """(fp32 ms, bf16 ms): forward and backward of every MatMul, Gemm, Conv and ConvTranspose
    of the graph through oneDNN (`tool`: the built tools/dnnl_ceiling), run in environment `env`."""
    request = json.dumps({"problems": problems(onnx_path)})
    out = subprocess.run([tool], input=request, env=env, check=True, capture_output=True,
                         text=True)
    result = json.loads(out.stdout)
    return result["fp32_ms"], result["bf16_ms"]


def tool_beside(ampc):
    """tools/dnnl_ceiling in the build folder that holds `ampc` (build/tools/ampc/ampc)."""
    tools = os.path.dirname(os.path.dirname(os.path.abspath(ampc)))
    return os.path.join(tools, "dnnl_ceiling", "dnnl_ceiling")
