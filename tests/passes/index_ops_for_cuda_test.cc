// index_ops_for_cuda (passes/index_ops_for_cuda.h): GatherElements, ScatterElements, GatherND,
// OneHot, Trilu, Tile and EyeLike rewritten into Gather, ScatterND, Where and Expand compute the
// CPU ops' results bit for bit, in fp32 and fp16 (16-bit scatter_add accumulates in fp32 in both),
// with negative and repeated indices, on every axis, batch_dims, both triangles and a constant
// diagonal offset, OneHot indices outside the depth and of a float type; a Trilu whose offset
// is computed is left as it is; an index out of range fails as the op fails. ONNX's own data
// for these ops runs through the rewrite too (the conformance suite compiles for the default
// CUDA target).
#include "passes/index_ops_for_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "tests/passes/cuda_rewrite_test_util.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

std::unique_ptr<ir::Model> make_model(DType t) {
  auto m = std::make_unique<ir::Model>();
  m->opsets = {{"", 17}};
  ir::Graph& g = *m->graph;
  g.name = "index_ops";
  auto input = [&](const std::string& name, Shape s, DType dt) {
    return test_util::add_input(g, name, std::move(s), dt);
  };
  auto ints = [&](const std::string& name, Shape s, std::vector<int64_t> values) {
    return test_util::add_ints(g, name, std::move(s), values);
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
  // EyeLike of a [4, 5] input, on the main diagonal and above it (torch's .diagonal()).
  ir::Value* square = input("square", {4, 5}, t);
  node("EyeLike", {square}, {4, 5});
  with(node("EyeLike", {square}, {4, 5}), ir::Attribute::make_int("k", 2));
  // GatherND: pairs of coordinates; one coordinate per batch row; pairs per batch row.
  node("GatherND", {x, ints("nd_pairs", {2, 2}, {0, -1, 2, 1})}, {2, 5});
  with(node("GatherND", {x, ints("nd_rows", {3, 2, 1}, {1, -1, 0, 3, 2, 2})}, {3, 2, 5}),
       ir::Attribute::make_int("batch_dims", 1));
  with(node("GatherND", {x, ints("nd_batch_pairs", {3, 2}, {0, 0, 3, 4, -1, -5})}, {3}),
       ir::Attribute::make_int("batch_dims", 1));
  // OneHot with negative indices and indices outside [-depth, depth), on the last and first
  // axis, and of float indices.
  ir::Value* hot = ints("hot", {2, 3}, {0, 4, -1, 7, -6, 2});
  ir::Value* depth = ints("depth", {}, {5});
  ir::Value* on_off = input("on_off", {2}, t);
  node("OneHot", {hot, depth, on_off}, {2, 3, 5});
  with(node("OneHot", {hot, depth, on_off}, {5, 2, 3}), axis(0));
  node("OneHot", {input("hot_float", {2, 3}, t), depth, on_off}, {2, 3, 5});  // truncated
  return m;
}

std::map<std::string, rt::Tensor> inputs(DType t) {
  std::map<std::string, rt::Tensor> in;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{{"x", {3, 4, 5}},
                                                                              {"u", {3, 2, 5}},
                                                                              {"v", {2, 4, 5}},
                                                                              {"w", {3, 4, 1}},
                                                                              {"square", {4, 5}},
                                                                              {"on_off", {2}}}) {
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
  const std::vector<float> hot = {0, 4.75f, -1.25f, 7, -5.5f, 2.5f};
  rt::Tensor h(t, {2, 3});
  for (size_t i = 0; i < hot.size(); ++i) {
    if (t == DType::kFloat16)
      h.data<Half>()[i] = float_to_half(hot[i]);
    else
      h.data<float>()[i] = hot[i];
  }
  in["hot_float"] = h;
  return in;
}

TEST(IndexOpsForCuda, GiveTheCpuOpsBits) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    auto plain = make_model(t);
    auto rewritten = make_model(t);
    EXPECT_EQ(index_ops_for_cuda(*rewritten), 17) << "the Trilu with a computed k stays";
    for (const auto& n : rewritten->graph->nodes) {
      EXPECT_TRUE(n->op_type != "GatherElements" && n->op_type != "ScatterElements" &&
                  n->op_type != "GatherND" && n->op_type != "OneHot" && n->op_type != "Tile" &&
                  n->op_type != "EyeLike")
          << n->label();
    }
    const auto want = test_util::run_on_cpu(*plain, inputs(t));
    const auto got = test_util::run_on_cpu(*rewritten, inputs(t));
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

namespace ampc::passes {
namespace {

// An index the op refuses (one past the axis, or before its start) makes the rewritten plan
// fail as the op does, instead of reading another element of the flattened data.
TEST(IndexOpsForCuda, AnIndexOutOfRangeFailsAsTheOpDoes) {
  struct Case {
    std::string op;
    Shape index_shape;
    std::vector<int64_t> index;
    Shape out;
  };
  for (const Case& c : std::vector<Case>{{"GatherElements", {2, 3}, {0, 1, 2, 3, 0, 1}, {2, 3}},
                                         {"GatherElements", {2, 3}, {0, -4, 2, 1, 0, 1}, {2, 3}},
                                         {"GatherND", {2, 2}, {0, 3, 1, 0}, {2}},
                                         {"GatherND", {2, 2}, {-3, 0, 1, 0}, {2}}}) {
    auto make = [&] {
      auto m = std::make_unique<ir::Model>();
      m->opsets = {{"", 17}};
      ir::Graph& g = *m->graph;
      ir::Value* x = test_util::add_input(g, "x", {2, 3}, DType::kFloat32);
      ir::Value* i = test_util::add_ints(g, "i", c.index_shape, c.index);
      ir::Value* y = g.add_value("y", {DType::kFloat32, c.out});
      g.outputs.push_back(y);
      ir::Node* n = g.add_node(c.op, {x, i}, {y}, "n");
      if (c.op == "GatherElements") n->attributes.push_back(ir::Attribute::make_int("axis", 1));
      return m;
    };
    auto rewritten = make();
    ASSERT_EQ(index_ops_for_cuda(*rewritten), 1) << c.op;
    std::map<std::string, rt::Tensor> in;
    in["x"] = rt::Tensor(DType::kFloat32, {2, 3});
    for (int64_t k = 0; k < 6; ++k) in["x"].data<float>()[k] = static_cast<float>(k);
    EXPECT_THROW(test_util::run_on_cpu(*make(), in), Error)
        << c.op << ": the op itself refuses the index";
    EXPECT_THROW(test_util::run_on_cpu(*rewritten, in), Error) << c.op;
  }
}

}  // namespace
}  // namespace ampc::passes
