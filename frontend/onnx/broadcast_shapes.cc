#include "frontend/onnx/broadcast_shapes.h"

#include <algorithm>
#include <set>
#include <string>

#include "base/error.h"

namespace ampc::onnx_io {
namespace {

// ONNX's operators with multidirectional (numpy) broadcasting of all their inputs.
const std::set<std::string>& broadcasting_ops() {
  static const std::set<std::string> ops = {
      "Add", "Sub", "Mul",   "Div",  "Pow",         "Mod",     "And",
      "Or",  "Xor", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
      "Max", "Min", "Mean",  "Sum",  "Where",       "BitShift"};
  return ops;
}

bool broadcast(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  for (size_t i = 0; i < rank; ++i) {
    int64_t size = 1;
    for (const auto& s : shapes) {
      if (i >= s.size()) continue;
      const int64_t d = s[s.size() - 1 - i];
      if (d == 1) continue;
      if (size != 1 && d != size) return false;
      size = d;
    }
  }
  return true;
}

}  // namespace

void refuse_unbroadcastable_inputs(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    if (!n->domain.empty() || !broadcasting_ops().count(n->op_type)) continue;
    std::vector<std::vector<int64_t>> shapes;
    std::string text;
    bool known = true;  // dynamic shapes are left to the passes that fix them
    for (const ir::Value* in : n->inputs) {
      if (!in) continue;
      known = known && in->type.is_static();
      if (!known) break;
      shapes.push_back(*in->type.shape);
      text += (text.empty() ? "'" : " and '") + in->name + "' " + in->type.str();
    }
    if (known && !broadcast(shapes)) {
      throw Error("node " + n->label() + ": inputs " + text + " do not broadcast");
    }
  }
}

}  // namespace ampc::onnx_io
