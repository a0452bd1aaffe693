#include "runtime/cpu/op_registry.h"

#include "runtime/cpu/ops/all_ops.h"

namespace ampc::rt::cpu {

void OpRegistry::add(const std::string& op, CpuOp fn, const std::string& domain) {
  ops_.add({domain, op}, std::move(fn));
}

const CpuOp* OpRegistry::find(const std::string& op, const std::string& domain) const {
  return ops_.find({domain, op});
}

std::vector<ops::OpKey> OpRegistry::keys() const {
  return ops_.keys();
}

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_all_cpu_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace ampc::rt::cpu
