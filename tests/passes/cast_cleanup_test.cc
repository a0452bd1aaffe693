// Cast cleanup and common-subexpression elimination on small hand-built graphs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/verifier.h"
#include "passes/cast_cleanup.h"
#include "passes/common_subexpression.h"
#include "passes/dead_code_elimination.h"

namespace ampc {
namespace {

using passes::cleanup_casts;
using passes::dtype_holds;
using passes::eliminate_common_subexpressions;

// A model with one input `x` of dtype `t`, shape [4].
class Builder {
 public:
  explicit Builder(DType t) {
    model.opsets = {{"", 17}};
    x = model.graph->add_value("x", {t, std::vector<int64_t>{4}});
    x->is_graph_input = true;
    model.graph->inputs.push_back(x);
  }
  ir::Value* cast(ir::Value* v, DType to) {
    ir::Value* out = value(to);
    ir::Node* n = model.graph->add_node("Cast", {v}, {out}, "cast" + std::to_string(count_));
    n->attributes.push_back(ir::Attribute::make_int("to", static_cast<int64_t>(to)));
    return out;
  }
  ir::Value* op(const std::string& type, std::vector<ir::Value*> in, DType t) {
    ir::Value* out = value(t);
    model.graph->add_node(type, std::move(in), {out}, type + std::to_string(count_));
    return out;
  }
  void output(ir::Value* v) { model.graph->outputs.push_back(v); }
  int count(const std::string& op) const {
    int c = 0;
    for (const auto& n : model.graph->nodes) c += n->op_type == op;
    return c;
  }

  ir::Model model;
  ir::Value* x;

 private:
  ir::Value* value(DType t) {
    return model.graph->add_value("v" + std::to_string(++count_), {t, std::vector<int64_t>{4}});
  }
  int count_ = 0;
};

TEST(DtypeHolds, WidthRelation) {
  EXPECT_TRUE(dtype_holds(DType::kFloat32, DType::kFloat16));
  EXPECT_TRUE(dtype_holds(DType::kFloat32, DType::kBFloat16));
  EXPECT_FALSE(dtype_holds(DType::kFloat16, DType::kBFloat16));
  EXPECT_FALSE(dtype_holds(DType::kBFloat16, DType::kFloat16));
  EXPECT_FALSE(dtype_holds(DType::kFloat16, DType::kFloat32));
  EXPECT_TRUE(dtype_holds(DType::kInt64, DType::kInt32));
  EXPECT_FALSE(dtype_holds(DType::kInt32, DType::kInt64));
  EXPECT_TRUE(dtype_holds(DType::kInt32, DType::kUInt16));
  EXPECT_FALSE(dtype_holds(DType::kUInt32, DType::kInt8));
  EXPECT_TRUE(dtype_holds(DType::kFloat32, DType::kInt16));
  EXPECT_FALSE(dtype_holds(DType::kFloat32, DType::kInt32));
  EXPECT_TRUE(dtype_holds(DType::kInt8, DType::kBool));
}

TEST(CastCleanup, RoundTripThroughWiderTypeIsRemoved) {
  Builder b(DType::kFloat16);
  ir::Value* y =
      b.op("Relu", {b.cast(b.cast(b.x, DType::kFloat32), DType::kFloat16)}, DType::kFloat16);
  b.output(y);
  EXPECT_GE(cleanup_casts(b.model), 1);
  EXPECT_EQ(b.count("Cast"), 0);
  EXPECT_EQ(y->producer->inputs[0], b.x);
  ir::verify(b.model);
}

TEST(CastCleanup, RoundTripThroughNarrowerTypeIsARoundingAndStays) {
  Builder b(DType::kFloat32);
  b.output(b.op("Relu", {b.cast(b.cast(b.x, DType::kFloat16), DType::kFloat32)}, DType::kFloat32));
  EXPECT_EQ(cleanup_casts(b.model), 0);
  EXPECT_EQ(b.count("Cast"), 2);
}

TEST(CastCleanup, ChainThroughWiderTypeIsShortened) {
  Builder b(DType::kFloat16);
  ir::Value* y = b.cast(b.cast(b.x, DType::kFloat32), DType::kBFloat16);
  b.output(b.op("Relu", {y}, DType::kBFloat16));
  EXPECT_EQ(cleanup_casts(b.model), 1);
  ASSERT_EQ(b.count("Cast"), 1);
  EXPECT_EQ(y->producer->inputs[0], b.x);
  ir::verify(b.model);
}

TEST(CastCleanup, CastToOwnDtypeIsRemoved) {
  Builder b(DType::kFloat32);
  b.output(b.op("Relu", {b.cast(b.x, DType::kFloat32)}, DType::kFloat32));
  EXPECT_EQ(cleanup_casts(b.model), 1);
  EXPECT_EQ(b.count("Cast"), 0);
  ir::verify(b.model);
}

TEST(CastCleanup, IntegerRoundTrips) {
  Builder widen(DType::kInt32);
  widen.output(widen.op("Neg", {widen.cast(widen.cast(widen.x, DType::kInt64), DType::kInt32)},
                        DType::kInt32));
  cleanup_casts(widen.model);
  EXPECT_EQ(widen.count("Cast"), 0);

  Builder narrow(DType::kInt64);  // int64 -> int32 -> int64 truncates: kept
  narrow.output(narrow.op("Neg", {narrow.cast(narrow.cast(narrow.x, DType::kInt32), DType::kInt64)},
                          DType::kInt64));
  cleanup_casts(narrow.model);
  EXPECT_EQ(narrow.count("Cast"), 2);
}

TEST(CastCleanup, GraphOutputsKeepTheirName) {
  Builder b(DType::kFloat32);
  ir::Value* y = b.cast(b.x, DType::kFloat32);
  b.output(y);
  cleanup_casts(b.model);
  EXPECT_EQ(b.count("Cast"), 1);
  EXPECT_EQ(b.model.graph->outputs[0], y);
  ir::verify(b.model);
}

TEST(Cse, IdenticalCastsMerge) {
  Builder b(DType::kFloat32);
  ir::Value* c1 = b.cast(b.x, DType::kFloat16);
  ir::Value* c2 = b.cast(b.x, DType::kFloat16);
  ir::Value* c3 = b.cast(b.x, DType::kBFloat16);  // another `to`: not the same node
  ir::Value* sum = b.op("Add", {c1, c2}, DType::kFloat16);
  b.output(sum);
  b.output(b.op("Relu", {c3}, DType::kBFloat16));
  EXPECT_EQ(eliminate_common_subexpressions(b.model), 1);
  EXPECT_EQ(b.count("Cast"), 2);
  EXPECT_EQ(sum->producer->inputs[0], c1);
  EXPECT_EQ(sum->producer->inputs[1], c1);
  ir::verify(b.model);
}

TEST(Cse, MergesTransitively) {
  Builder b(DType::kFloat32);
  ir::Value* r1 = b.op("Relu", {b.cast(b.x, DType::kFloat16)}, DType::kFloat16);
  ir::Value* r2 = b.op("Relu", {b.cast(b.x, DType::kFloat16)}, DType::kFloat16);
  b.output(b.op("Add", {r1, r2}, DType::kFloat16));
  EXPECT_EQ(eliminate_common_subexpressions(b.model), 2);
  EXPECT_EQ(b.count("Relu"), 1);
  EXPECT_EQ(b.count("Cast"), 1);
  ir::verify(b.model);
}

TEST(Cse, RandomOpsMergeOnlyWithTheSameSeed) {
  Builder b(DType::kFloat32);
  ir::Value* d1 = b.op("Dropout", {b.x}, DType::kFloat32);
  ir::Value* d2 = b.op("Dropout", {b.x}, DType::kFloat32);
  b.output(b.op("Add", {d1, d2}, DType::kFloat32));
  EXPECT_EQ(eliminate_common_subexpressions(b.model), 0);

  Builder s(DType::kFloat32);
  ir::Value* s1 = s.op("Dropout", {s.x}, DType::kFloat32);
  ir::Value* s2 = s.op("Dropout", {s.x}, DType::kFloat32);
  s1->producer->attributes.push_back(ir::Attribute::make_int("seed", 7));
  s2->producer->attributes.push_back(ir::Attribute::make_int("seed", 7));
  s.output(s.op("Add", {s1, s2}, DType::kFloat32));
  EXPECT_EQ(eliminate_common_subexpressions(s.model), 1);
  ir::verify(s.model);
}

TEST(Cse, DifferentAttributesDoNotMerge) {
  Builder b(DType::kFloat32);
  ir::Value* a = b.op("LeakyRelu", {b.x}, DType::kFloat32);
  ir::Value* c = b.op("LeakyRelu", {b.x}, DType::kFloat32);
  a->producer->attributes.push_back(ir::Attribute::make_float("alpha", 0.1f));
  c->producer->attributes.push_back(ir::Attribute::make_float("alpha", 0.2f));
  b.output(b.op("Add", {a, c}, DType::kFloat32));
  EXPECT_EQ(eliminate_common_subexpressions(b.model), 0);
}

}  // namespace
}  // namespace ampc
