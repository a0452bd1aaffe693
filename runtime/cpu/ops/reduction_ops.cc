#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/families.h"

namespace ampc::rt::cpu {

void register_reduction_ops(OpRegistry& r) { (void)r; }

}  // namespace ampc::rt::cpu
