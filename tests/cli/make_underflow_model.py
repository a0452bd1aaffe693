# The underflow model of the mixed-precision tests: a linear regression whose loss is scaled by
# 1e-7, so that its gradients flush to zero in fp16 without loss scaling. Writes
# underflow.onnx and underflow.npz into the folder given as the only argument.
# Used by mixed_precision_train_test and amp_diagnostics_cli_test.
import sys, os, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(0)
w0 = (rng.standard_normal((16, 4)) * 0.1).astype(np.float32)
nodes = [
    h.make_node("MatMul", ["x", "w"], ["y"], name="linear"),
    h.make_node("Sub", ["y", "t"], ["diff"], name="residual"),
    h.make_node("Mul", ["diff", "diff"], ["sq"], name="square"),
    h.make_node("ReduceMean", ["sq"], ["mse"], name="mean", keepdims=0),
    h.make_node("Constant", [], ["tiny"], name="tiny_factor",  # a constant, not trained
                value=nh.from_array(np.array(1e-7, np.float32))),
    h.make_node("Mul", ["mse", "tiny"], ["loss"], name="tiny_loss"),
]
g = h.make_graph(nodes, "underflow",
                 [h.make_tensor_value_info("x", T.FLOAT, [32, 16]),
                  h.make_tensor_value_info("t", T.FLOAT, [32, 4])],
                 [h.make_tensor_value_info("loss", T.FLOAT, [])],
                 [nh.from_array(w0, "w")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.checker.check_model(m)
onnx.save(m, os.path.join(d, "underflow.onnx"))
x = rng.standard_normal((512, 16)).astype(np.float32)
w_true = rng.standard_normal((16, 4)).astype(np.float32)
np.savez(os.path.join(d, "underflow.npz"), x=x, t=(x @ w_true).astype(np.float32))
