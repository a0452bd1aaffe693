// CPU twin of kernels/cuda/softmax.h: the same computation on host pointers, in the kernels'
// partition and reduction order (kernels/shared/rowwise_tree.h), so that on a GPU machine the
// kernel and the twin agree bit for bit. It is the CPU backend's Softmax and LogSoftmax too
// (plus f64, computed in double); tests/unit/twin_rowwise_test.cc checks that the two agree
// bit for bit.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/twin/row_loops.h"

namespace ampc::kernels::twin {

void softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
             bool log_softmax);

// The backward (kernels/cuda/softmax.h's softmax_grad) on host pointers; f64 in double. y and dx
// of type `dtype`, dy of `dy_dtype`: the same, or f16 / bf16 read widened where dtype is f32
// (kernel_args.h's grad_input_fits; ampc.SoftmaxGrad with its dY's Cast folded in). f32 rows
// (inner 1) on AVX-512 loops where the CPU has them (row_loops.h).
void softmax_grad(DType dtype, DType dy_dtype, const void* y, const void* dy, void* dx,
                  int64_t outer, int64_t n, int64_t inner, bool log_softmax,
                  RowLoops loops = RowLoops::kBest);

}  // namespace ampc::kernels::twin
