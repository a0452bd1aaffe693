// torch's linear on a 3-D input, as exporters write it (Add(MatMul(x, W), b)), computed in
// 16 bits the way torch computes it. At::linear flattens a contiguous 3-D input to its rows
// and calls addmm once: the bias is added to the fp32 accumulator and the result rounded
// once. Written out as MatMul and Add, a 16-bit plan would round the product and then the
// sum (about 30% of a bf16 linear layer's outputs then differ from torch's by one unit).
// So after autocast, each such pair in fp16 or bf16 becomes Reshape(x, [B*T, K]) ->
// Gemm(., W, b) -> Reshape(., [B, T, N]): the graph states the one rounding, every backend
// computes it (a Gemm's C is part of its single rounding on the CPU and on the GPU), and
// the backward is Gemm's.
//
// Only rank 3: for inputs of rank 4 and more torch's linear is matmul, then add_ (two
// roundings), which the unrewritten graph already computes; rank-2 linears are exported
// as Gemm already. fp32 plans are left as they are (there the fold of lower/gemm_epilogue
// computes the same sum without a rewrite).
#pragma once

#include "ir/graph.h"
#include "passes/autocast.h"

namespace ampc::passes {

// The rewrite, for MatMul + Add pairs whose product and sum are fp16 or bf16, the Add's
// other operand the bias a 1-D parameter of N elements (or its Cast), x [B, T, K] and W [K, N]
// static, the product read by the Add alone. The report (when given) follows: the MatMul's
// decision becomes the Gemm's, the Add's goes, the Reshapes get theirs. Returns the number of
// linear layers rewritten.
int linear_layers_as_gemm(ir::Model& model, AutocastReport* report = nullptr);

}  // namespace ampc::passes
