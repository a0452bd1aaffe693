// Registration functions of the operator families (one .cc file each, same name).
#pragma once

namespace ampc::rt::cpu {

class OpRegistry;

void register_constant_ops(OpRegistry& r);  // constant_ops.cc: Constant
void register_elementwise_ops(
    OpRegistry& r);  // elementwise_ops.cc: unary/binary math, logic, Cast, Where, Clip...
void register_tensor_ops(OpRegistry& r);  // tensor_ops.cc: shape, layout and indexing ops
void register_nn_ops(OpRegistry& r);      // nn_ops.cc: MatMul, Gemm, Conv, pooling, normalisation
void register_reduction_ops(
    OpRegistry& r);                     // reduction_ops.cc: Reduce*, ArgMax/Min, Softmax, losses
void register_grad_ops(OpRegistry& r);  // grad_ops.cc: gradient ops of the "ampc" domain
// training_optimizers.cc: Adagrad, Momentum, Adam of "ai.onnx.preview.training"
void register_training_optimizer_ops(OpRegistry& r);
void register_amp_ops(OpRegistry& r);          // amp_ops.cc: loss-scaler ops of the "ampc" domain
void register_range_stats_ops(OpRegistry& r);  // range_stats_op.cc: ampc.RangeStats
void register_comm_ops(OpRegistry& r);  // comm_ops.cc: ampc.AllReduceStart/Wait (data parallel)
// random_ops.cc: RandomUniform, RandomNormal and their *Like forms
void register_random_ops(OpRegistry& r);

}  // namespace ampc::rt::cpu
