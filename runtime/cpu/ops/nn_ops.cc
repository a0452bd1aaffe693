// The nn family: matrix products, convolutions, pooling and normalisation layers. Each
// sub-family lives in its own nn_*.cc file.
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::rt::cpu {

void register_nn_ops(OpRegistry& r) {
  nn::register_matmul_ops(r);
  nn::register_conv_ops(r);
  nn::register_pool_ops(r);
  nn::register_norm_ops(r);
  nn::register_integer_ops(r);
}

}  // namespace ampc::rt::cpu
