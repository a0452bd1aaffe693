#!/usr/bin/python3
"""Writes the committed seed inputs of the fuzz targets (seeds/<target>/), small well-formed
files that reach deep into each reader; scripts/fuzz.sh adds models/ and ONNX's test data.
Run from anywhere with Debian's /usr/bin/python3 (numpy, onnx) and protoc on PATH."""
import io
import os
import re
import struct
import subprocess
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def put(target, name, data):
    d = os.path.join(here, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


# .npy: the dtypes ampc reads, 0-d, empty, every header version, Fortran order (refused).
arrays = {
    "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
    "f16_4": np.ones(4, dtype=np.float16),
    "f64_scalar": np.array(1.5),
    "i64_3": np.array([1, 2, 3], dtype=np.int64),
    "i32_2x2": np.eye(2, dtype=np.int32),
    "u8_5": np.arange(5, dtype=np.uint8),
    "bool_3": np.array([True, False, True]),
    "empty_0x4": np.zeros((0, 4), dtype=np.float32),
}
for name, a in arrays.items():
    put("npy_read", name + ".npy", npy_bytes(a))
put("npy_read", "v2.npy", npy_bytes(np.zeros(3, np.float32), (2, 0)))
put("npy_read", "v3.npy", npy_bytes(np.zeros(3, np.float32), (3, 0)))
put("npy_read", "fortran.npy", npy_bytes(np.asfortranarray(np.zeros((2, 3), np.float32))))
put("npy_read", "bigendian.npy", npy_bytes(np.zeros(3, ">f4")))

# .npz: stored and deflated, two arrays sharing the first axis.
for compress in (False, True):
    b = io.BytesIO()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([0, 1, 2, 3], dtype=np.int64)
    (np.savez_compressed if compress else np.savez)(b, x=x, y=y)
    put("npz_read", "xy_%s.npz" % ("deflate" if compress else "stored"), b.getvalue())

# A small training checkpoint: one initializer of each kind and the progress keys.
w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
s = helper.make_tensor("step", TensorProto.INT64, [], [7])
h = helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1, 2], np.float16).view(np.uint16).tolist())
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w, s, h])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
helper.set_model_props(model, {"ampc.checkpoint.step": "12", "ampc.checkpoint.data_position": "3"})
put("checkpoint_load", "tiny.onnx", model.SerializeToString())
put("onnx_import", "matmul.onnx", model.SerializeToString())

# Plans: one message in protobuf text format encoded by protoc, framed like plan_file.cc.
plan_text = """
producer: "ampc 0.1.0" model_name: "seed" target: "cpu"
buffers { id: 0 name: "x" } buffers { id: 1 name: "y" }
steps { op: "Relu" inputs: 0 outputs: 1 source_nodes: "relu" opset_version: 17 }
steps { op: "Reshape" inputs: 1 outputs: 0 }
steps { op: "Softmax" inputs: 1 outputs: 0 source_nodes: "softmax" rowwise { axis: 1 } }
inputs { name: "x" buffer: 0 } outputs { name: "y" buffer: 1 }
options { key: "train" value: "0" }
"""
payload = subprocess.run(
    ["protoc", "-I", root, "--encode=ampc.plan.Plan", "runtime/plan/plan.proto"],
    input=plan_text.encode(), capture_output=True, check=True, cwd=root).stdout


def fnv1a(b):
    h = 1469598103934665603
    for c in b:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


# The format version this tree reads (runtime/plan/plan_file.h), so the seed passes the header.
version = int(re.search(r"kPlanFormatVersion = (\d+);",
                        open(os.path.join(root, "runtime/plan/plan_file.h")).read()).group(1))
framed = b"AMPCPLAN" + struct.pack("<IQQ", version, len(payload), fnv1a(payload)) + payload
put("plan_load", "relu.plan", framed)
put("plan_load", "relu.payload", payload)

# --policy files.
put("policy_json", "full.json", '{"allow": ["MatMul", "Gemm"], "deny": ["Softmax"], '
    '"follow": ["Add"], "keep_fp32": ["head*"]}')
put("policy_json", "conflict.json", '{"allow": ["MatMul"], "deny": ["MatMul"]}')
put("policy_json", "unicode.json", '{"keep_fp32": ["\\u00e9*", "a\\"b"]}')

# --input-shape specs (one per line).
put("input_shape", "two.txt", "x=32x64\ny=32\n")
put("input_shape", "scalar.txt", "s=\n")
put("input_shape", "big.txt", "x=1099511627776x1099511627776\n")

# external_data fields (key=value lines, see external_data.cc).
put("external_data", "whole.txt", "location=data.bin\ndims=4x4\n")
put("external_data", "offset.txt", "location=sub/data.bin\noffset=8\nlength=8\ndims=2\n")
put("external_data", "escape.txt", "location=../outside.bin\n")
print("seeds written under", os.path.join(here, "seeds"), file=sys.stderr)
