// The CPU backend's operators, keyed by (domain, op type) as every per-op registry
// (ops/op_key.h). Each family of operators lives in
// its own file under runtime/cpu/ops/ and registers itself from register_all_cpu_ops.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ops/op_key.h"
#include "ops/op_map.h"
#include "runtime/cpu/op_context.h"

namespace ampc::rt::cpu {

using CpuOp = std::function<void(OpContext&)>;

class OpRegistry {
 public:
  // Throws std::logic_error when the op already has one (ops/op_map.h).
  void add(const std::string& op, CpuOp fn, const std::string& domain = "");
  // Null when the backend has no implementation.
  const CpuOp* find(const std::string& op, const std::string& domain) const;
  std::vector<ops::OpKey> keys() const;  // every op it runs (ampc ops)

  // The registry with every CPU operator (built once).
  static const OpRegistry& instance();

 private:
  ops::OpMap<CpuOp> ops_{"CPU operator"};
};

}  // namespace ampc::rt::cpu
