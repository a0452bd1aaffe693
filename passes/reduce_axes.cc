#include "passes/reduce_axes.h"

#include <set>

#include "ir/tensor.h"

namespace ampc::passes {

std::optional<std::vector<int64_t>> reduce_axes(const ir::Node& n, size_t rank) {
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && n.inputs[1]) {
    const ir::Value* v = n.inputs[1];
    if (!v->initializer) return std::nullopt;
    auto values = ir::int_values(*v->initializer);
    if (!values) return std::nullopt;
    axes = *values;
  } else if (const ir::Attribute* a = n.attr("axes")) {
    axes = a->ints;
  }
  if (axes.empty()) {
    const ir::Attribute* noop = n.attr("noop_with_empty_axes");
    if (noop && noop->i != 0) return std::nullopt;
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::set<int64_t> unique;
  for (int64_t a : axes) unique.insert(a < 0 ? a + static_cast<int64_t>(rank) : a);
  return std::vector<int64_t>(unique.begin(), unique.end());
}

}  // namespace ampc::passes
