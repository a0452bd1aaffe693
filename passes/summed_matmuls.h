// A sum of products that share their output's shape, sum_i A_i^T B_i, computed as one product
// of the operands stacked along the summed axis: [A_1; ...; A_n]^T [B_1; ...; B_n].
//
// Autodiff writes the gradient of a weight that a graph reads many times as such a sum: an
// unrolled recurrent layer (passes/recurrent_lowering.h) multiplies by its hidden-to-hidden
// weight once a time step, so the weight's gradient is T products h_{t-1}^T dGates_t of a
// batch's rows each (K = 32 for a batch of 32), added one by one. Each of those GEMMs is too
// thin to reach the cores' or the GPU's speed, and each addition reads and writes the whole
// weight-sized sum again. One GEMM over the T * batch rows does the same arithmetic at full
// speed and reads the pieces once.
//
// Float32 and float64 sums: the rewrite changes the order of the additions (one GEMM's
// accumulation instead of T roundings of the partial sums), which a float32 training step
// allows as any GEMM's blocking does. 16-bit sums where every term is the gradient of one
// lowered LSTM, GRU or RNN node (ir::Model::recurrent_lowerings): PyTorch runs that layer as
// one cuDNN or oneDNN call, whose weight gradient is one product over the time steps,
// accumulated in fp32 and rounded once, as the stacked product computes it. Other 16-bit sums
// keep their per-op roundings, autocast's semantics (autograd adds a weight's gradients in
// the 16-bit type, as in a Python loop over an LSTMCell). Rewritten where the stacked
// operands are no larger than the partial sums they replace (n * m * n_cols elements), so the
// copies cost less than the additions saved; the operands then live until the sum, which the
// memory plan accounts.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Rewrites every such sum of the main graph (a tree of Adds whose leaves are MatMul(Transpose(
// P_i), B_i) or Gemm(P_i, B_i) with transA and without C (a Linear layer's weight gradient, of
// an RNN cell stepped in a Python loop), of 2-D operands, each read only by the tree); returns
// how many.
int stack_summed_matmuls(ir::Model& model);

}  // namespace ampc::passes
