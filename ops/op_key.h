// The one key convention of every per-operator registry (op facts, gradient rules, CPU ops,
// CUDA step builders): a domain and an op type, with ONNX's default domain spelled "" (a
// model may also write "ai.onnx" for it).
#pragma once

#include <compare>
#include <string>
#include <string_view>

namespace ampc::ops {

// "" for ONNX's default domain however a model spells it; other domains unchanged.
constexpr std::string_view canonical_domain(std::string_view domain) {
  return domain == "ai.onnx" ? std::string_view() : domain;
}

struct OpKey {
  std::string domain;  // canonical: "" is the default ONNX domain
  std::string op;

  OpKey(std::string_view op_domain, std::string_view op_type)
      : domain(canonical_domain(op_domain)), op(op_type) {}
  // "Relu", "ampc.AllReduceSum": how messages name an op.
  std::string str() const { return domain.empty() ? op : domain + "." + op; }
  auto operator<=>(const OpKey&) const = default;
};

}  // namespace ampc::ops
