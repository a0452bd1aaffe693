// Constant folding evaluates integer arithmetic over constants, but never over values that
// change: a training-state counter (`counter + 1`) or an initializer that is also a graph
// input. Folding those would freeze the counter at its initial value.
#include <gtest/gtest.h>

#include <cstring>

#include "passes/constant_folding.h"

namespace ampc::passes {
namespace {

ir::Value* int_initializer(ir::Graph& g, const std::string& name, int64_t v) {
  ir::Value* value = g.add_value(name, {DType::kInt64, std::vector<int64_t>{}});
  value->initializer = std::make_unique<ir::Tensor>();
  value->initializer->name = name;
  value->initializer->dtype = DType::kInt64;
  value->initializer->bytes.resize(8);
  std::memcpy(value->initializer->bytes.data(), &v, 8);
  g.initializers.push_back(value);
  return value;
}

// out = a + one, with `a` as given; returns the number of nodes folded.
int fold_sum(bool a_is_state, bool a_is_input) {
  ir::Model m;
  ir::Graph& g = *m.graph;
  ir::Value* a = int_initializer(g, "a", 41);
  ir::Value* one = int_initializer(g, "one", 1);
  ir::Value* out = g.add_value("out", {DType::kInt64, std::vector<int64_t>{}});
  g.add_node("Add", {a, one}, {out}, "add");
  g.outputs.push_back(out);
  if (a_is_state) m.state_updates.push_back({a, out});
  if (a_is_input) {
    a->is_graph_input = true;
    g.inputs.push_back(a);
  }
  return fold_constants(m);
}

TEST(ConstantFolding, FoldsConstantsButNotStateOrOverridableInitializers) {
  EXPECT_EQ(fold_sum(false, false), 1);
  EXPECT_EQ(fold_sum(true, false), 0);
  EXPECT_EQ(fold_sum(false, true), 0);
}

}  // namespace
}  // namespace ampc::passes
