// index_ops_for_cuda (passes/index_ops_for_cuda.h): GatherElements, ScatterElements, Trilu
// and Tile rewritten into Gather, ScatterND, Where and Expand compute the CPU ops' results bit
// for bit,
// in fp32 and fp16 (16-bit scatter_add accumulates in fp32 in both), with negative and
// repeated indices, on every axis, both triangles and a constant diagonal offset; a Trilu
// whose offset is computed is left as it is. ONNX's own data for these ops runs through the
// rewrite too (the conformance suite compiles for the default CUDA target).
#include "passes/index_ops_for_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

std::unique_ptr<ir::Model> make_model(DType t) {
  auto m = std::make_unique<ir::Model>();
  m->opsets = {{"", 17}};
  ir::Graph& g = *m->graph;
  g.name = "index_ops";
  auto input = [&](const std::string& name, Shape s, DType dt) {
    ir::Value* v = g.add_value(name, {dt, std::move(s)});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  };
  auto ints = [&](const std::string& name, Shape s, std::vector<int64_t> values) {
    ir::Value* v = g.add_value(name, {DType::kInt64, s});
    auto tensor = std::make_unique<ir::Tensor>(
        ir::tensor_of<int32_t>(DType::kInt64, DType::kInt64, s, values));
    tensor->name = name;
    v->initializer = std::move(tensor);
    g.initializers.push_back(v);
    return v;
  };
  auto node = [&](const std::string& op, std::vector<ir::Value*> in, Shape out) {
    ir::Value* y = g.add_value(op + std::to_string(g.nodes.size()), {t, std::move(out)});
    g.outputs.push_back(y);
    return g.add_node(op, std::move(in), {y}, y->name);
  };
  auto with = [](ir::Node* n, ir::Attribute a) { n->attributes.push_back(std::move(a)); };
  ir::Value* x = input("x", {3, 4, 5}, t);
  ir::Value* u = input("u", {3, 2, 5}, t);
  ir::Value* v = input("v", {2, 4, 5}, t);
  ir::Value* w = input("w", {3, 4, 1}, t);
  ir::Value* k = input("k", {}, DType::kInt64);
  // Axis 1 with negative and repeated indices; axis 0 and the last axis.
  ir::Value* i1 = ints("i1", {3, 2, 5}, {0, -1, 3, 3, 1, 2, 2, 2, 0, -4, 1, 1, 0, 3, 2,
                                         3, 3,  3, 3, 3, 0, 1, 2, 3, -2, 1, 0, 1, 0, 1});
  ir::Value* i0 = ints("i0", {2, 4, 5}, std::vector<int64_t>(40, 2));
  ir::Value* i2 = ints("i2", {3, 4, 1}, {4, 0, -1, 2, 3, 3, 1, 0, 2, 4, -5, 1});
  auto axis = [](int64_t a) { return ir::Attribute::make_int("axis", a); };
  auto add = [] { return ir::Attribute::make_string("reduction", "add"); };
  with(node("GatherElements", {x, i1}, {3, 2, 5}), axis(1));
  with(node("GatherElements", {x, i2}, {3, 4, 1}), axis(-1));
  node("GatherElements", {x, i0}, {2, 4, 5});
  ir::Node* n = node("ScatterElements", {x, i1, u}, {3, 4, 5});
  with(n, axis(1));
  with(n, add());
  with(node("ScatterElements", {x, i0, v}, {3, 4, 5}), add());
  with(node("ScatterElements", {x, i2, w}, {3, 4, 5}), axis(2));
  node("Trilu", {x}, {3, 4, 5});
  with(node("Trilu", {x, ints("minus_one", {}, {-1})}, {3, 4, 5}),
       ir::Attribute::make_int("upper", 0));
  with(node("Trilu", {x, k}, {3, 4, 5}), ir::Attribute::make_int("upper", 0));
  node("Tile", {x, ints("repeats", {3}, {2, 1, 3})}, {6, 4, 15});
  return m;
}

std::map<std::string, rt::Tensor> inputs(DType t) {
  std::map<std::string, rt::Tensor> in;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"x", {3, 4, 5}}, {"u", {3, 2, 5}}, {"v", {2, 4, 5}}, {"w", {3, 4, 1}}}) {
    rt::Tensor a(t, shape);
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float f = 0.37f * static_cast<float>(i % 23) - 3.1f + static_cast<float>(name[0]) / 64;
      if (t == DType::kFloat16)
        a.data<Half>()[i] = float_to_half(f);
      else
        a.data<float>()[i] = f;
    }
    in[name] = a;
  }
  rt::Tensor k(DType::kInt64, {});
  k.data<int64_t>()[0] = 1;
  in["k"] = k;
  return in;
}

TEST(IndexOpsForCuda, GiveTheCpuOpsBits) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    auto plain = make_model(t);
    auto rewritten = make_model(t);
    EXPECT_EQ(index_ops_for_cuda(*rewritten), 9) << "the Trilu with a computed k stays";
    for (const auto& n : rewritten->graph->nodes) {
      EXPECT_TRUE(n->op_type != "GatherElements" && n->op_type != "ScatterElements" &&
                  n->op_type != "Tile")
          << n->label();
    }
    compiler::CompileOptions o;
    o.lowering.target = "cpu";
    rt::cpu::Executor a(compiler::compile_model(*plain, o, "plain"));
    rt::cpu::Executor b(compiler::compile_model(*rewritten, o, "rewritten"));
    const auto want = a.run(inputs(t));
    const auto got = b.run(inputs(t));
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, w] : want) {
      const rt::Tensor& g = got.at(name);
      ASSERT_EQ(g.shape(), w.shape()) << name;
      EXPECT_EQ(std::memcmp(g.raw(), w.raw(), w.nbytes()), 0) << name << " " << dtype_name(t);
    }
  }
}

}  // namespace
}  // namespace ampc::passes
