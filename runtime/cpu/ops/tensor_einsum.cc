#include "runtime/cpu/ops/tensor_common.h"
namespace ampc::rt::cpu {
void register_tensor_einsum(OpRegistry& r) { (void)r; }
}  // namespace ampc::rt::cpu
