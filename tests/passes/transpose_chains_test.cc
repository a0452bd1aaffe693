// compose_transposes (passes/transpose_chains.h): Transpose(Transpose(x, p1), p2) reads x
// with p1[p2[i]]; an identity composition leaves its readers reading x; the inner Transpose
// keeps its other readers; ONNX's default permutation (reversed axes) composes too. The
// graphs also run on the CPU backend, against the transpositions written out here.
#include "passes/transpose_chains.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

struct Chain {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* x = nullptr;
  Chain() {
    model->opsets.push_back({"", 17});
    model->graph->name = "chains";
    x = model->graph->add_value("x", {DType::kFloat32, std::vector<int64_t>{2, 3, 4, 5}});
    model->graph->inputs = {x};
  }
  ir::Node* transpose(ir::Value* in, const std::string& out, std::vector<int64_t> perm,
                      bool with_attr = true) {
    std::vector<int64_t> shape(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      shape[i] = (*in->type.shape)[static_cast<size_t>(perm[i])];
    ir::Value* v = model->graph->add_value(out, {DType::kFloat32, shape});
    ir::Node* n = model->graph->add_node("Transpose", {in}, {v}, "t_" + out);
    if (with_attr) n->attributes.push_back(ir::Attribute::make_ints("perm", std::move(perm)));
    return n;
  }
};

std::vector<int64_t> perm_of(const ir::Node& n) {
  const ir::Attribute* a = n.attr("perm");
  return a ? a->ints : std::vector<int64_t>{};
}

const ir::Node* node(const ir::Model& m, const std::string& name) {
  for (const auto& n : m.graph->nodes) {
    if (n->name == name) return n.get();
  }
  return nullptr;
}

rt::Tensor input() {
  rt::Tensor x(DType::kFloat32, {2, 3, 4, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
  return x;
}

std::map<std::string, rt::Tensor> run(ir::Model& m) {
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  rt::cpu::Executor exec(compiler::compile_model(m, o, "chains"));
  return exec.run({{"x", input()}});
}

// Element idx of Transpose(x, perm) with x = 0, 1, 2, ... in row-major order.
float transposed_element(const std::vector<int64_t>& perm, std::vector<int64_t> idx) {
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  std::vector<int64_t> src(4);
  for (size_t i = 0; i < 4; ++i) src[static_cast<size_t>(perm[i])] = idx[i];
  int64_t off = 0;
  for (size_t i = 0; i < 4; ++i) off = off * shape[i] + src[i];
  return static_cast<float>(off);
}

// Two links that are not their own inverses, and a third after them: the first composition
// is p1[p2[i]] (its inverse order, p2[p1[i]], is another permutation here), the second
// builds on it. The inner links keep their graph outputs.
struct ThreeLinks : Chain {
  ir::Node* t1 = transpose(x, "a", {0, 2, 3, 1});  // [2, 4, 5, 3]
  ir::Node* t2 = transpose(t1->outputs[0], "b", {1, 3, 0, 2});
  ir::Node* t3 = transpose(t2->outputs[0], "c", {3, 2, 1, 0});
  ThreeLinks() { model->graph->outputs = {t1->outputs[0], t2->outputs[0], t3->outputs[0]}; }
};

// Every element of `got` against Transpose(x, perm) written out.
void expect_transposed(const rt::Tensor& got, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  std::vector<int64_t> out_shape(4);
  for (size_t i = 0; i < 4; ++i) out_shape[i] = shape[static_cast<size_t>(perm[i])];
  ASSERT_EQ(got.shape(), out_shape);
  std::vector<int64_t> idx(4, 0);
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_EQ(got.data<float>()[i], transposed_element(perm, idx)) << i;
    for (size_t d = 4; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

TEST(TransposeChains, ComposesEachLinkWithTheChainBeforeIt) {
  ThreeLinks c;
  EXPECT_EQ(compose_transposes(*c.model), 2);
  EXPECT_EQ(c.t2->inputs[0], c.x);
  EXPECT_EQ(perm_of(*c.t2), (std::vector<int64_t>{2, 1, 0, 3}));  // {0,2,3,1}[{1,3,0,2}]
  EXPECT_EQ(c.t3->inputs[0], c.x);
  EXPECT_EQ(perm_of(*c.t3), (std::vector<int64_t>{3, 0, 1, 2}));
  EXPECT_EQ(c.t1->outputs[0]->uses.size(), 0u);  // a graph output still

  // The chain as given (the compiler composes it again: nothing left to do) and as composed.
  ThreeLinks unchanged;
  for (ir::Model* m : {unchanged.model.get(), c.model.get()}) {
    const auto out = run(*m);
    expect_transposed(out.at("a"), {0, 2, 3, 1});
    expect_transposed(out.at("b"), {2, 1, 0, 3});
    expect_transposed(out.at("c"), {3, 0, 1, 2});
  }
}

// A transpose and its inverse: the readers read x, the pair is gone after dead code; a
// Transpose without perm reverses the axes.
TEST(TransposeChains, AnIdentityCompositionLeavesItsReadersOnTheSource) {
  Chain c;
  ir::Node* t1 = c.transpose(c.x, "a", {0, 2, 3, 1});
  ir::Node* t2 = c.transpose(t1->outputs[0], "b", {0, 3, 1, 2});
  ir::Value* y =
      c.model->graph->add_value("y", {DType::kFloat32, std::vector<int64_t>{2, 3, 4, 5}});
  c.model->graph->add_node("Neg", {t2->outputs[0]}, {y}, "neg");
  ir::Node* r1 = c.transpose(c.x, "r", {3, 2, 1, 0}, false);
  ir::Node* r2 = c.transpose(r1->outputs[0], "rr", {3, 2, 1, 0}, false);
  c.model->graph->outputs = {y, r2->outputs[0]};

  EXPECT_EQ(compose_transposes(*c.model), 2);
  EXPECT_EQ(node(*c.model, "neg")->inputs[0], c.x);
  EXPECT_EQ(perm_of(*r2), (std::vector<int64_t>{0, 1, 2, 3}));  // a graph output: kept
  const auto out = run(*c.model);
  const rt::Tensor x = input();
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(out.at("y").data<float>()[i], -x.data<float>()[i]);
    ASSERT_EQ(out.at("rr").data<float>()[i], x.data<float>()[i]);
  }
}

}  // namespace
}  // namespace ampc::passes
