// integer_ops_for_cuda (passes/integer_ops_for_cuda.h): integer Clip (both bounds, one),
// Max and Min of three broadcast operands, Neg and Abs (the type's minimum included, which
// wraps), and Mod with and without fmod (negative operands, a divisor of 0 and of -1),
// rewritten into the integer ops the CUDA backend has, give the CPU ops' results bit for bit
// on the CPU backend, in int64 and int32; float data is left alone.
#include "passes/integer_ops_for_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/passes/cuda_rewrite_test_util.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

std::unique_ptr<ir::Model> make_model(DType t) {
  auto m = std::make_unique<ir::Model>();
  m->opsets = {{"", 17}};
  ir::Graph& g = *m->graph;
  g.name = "integer_ops";
  ir::Value* a = test_util::add_input(g, "a", {2, 6}, t);
  ir::Value* b = test_util::add_input(g, "b", {6}, t);
  ir::Value* c = test_util::add_input(g, "c", {2, 1}, t);
  ir::Value* lo = test_util::add_input(g, "lo", {}, t);
  ir::Value* hi = test_util::add_input(g, "hi", {1}, t);
  ir::Value* f = test_util::add_input(g, "f", {2, 6}, DType::kFloat32);
  auto node = [&](const std::string& op, std::vector<ir::Value*> in, Shape out, DType dt,
                  std::vector<ir::Attribute> attributes = {}) {
    ir::Value* y = g.add_value(op + std::to_string(g.nodes.size()), {dt, std::move(out)});
    g.outputs.push_back(y);
    ir::Node* n = g.add_node(op, std::move(in), {y}, y->name);
    n->attributes = std::move(attributes);
  };
  node("Clip", {a, lo, hi}, {2, 6}, t);
  node("Clip", {a, lo}, {2, 6}, t);
  node("Clip", {a, nullptr, hi}, {2, 6}, t);
  node("Max", {a, b, c}, {2, 6}, t);
  node("Min", {c, a, b}, {2, 6}, t);
  node("Neg", {a}, {2, 6}, t);
  node("Abs", {a}, {2, 6}, t);
  node("Mod", {a, b}, {2, 6}, t);
  std::vector<ir::Attribute> fmod;
  fmod.push_back(ir::Attribute::make_int("fmod", 1));
  node("Mod", {a, b}, {2, 6}, t, std::move(fmod));
  node("Abs", {f}, {2, 6}, DType::kFloat32);  // float: a generated kernel, left alone
  return m;
}

template <typename T>
rt::Tensor tensor(DType t, Shape shape, const std::vector<int64_t>& v) {
  rt::Tensor x(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) x.data<T>()[i] = static_cast<T>(v[i]);
  return x;
}

template <typename T>
std::map<std::string, rt::Tensor> inputs(DType t) {
  const auto min = static_cast<int64_t>(std::numeric_limits<T>::min());
  std::map<std::string, rt::Tensor> in;
  in["a"] = tensor<T>(t, {2, 6}, {7, -7, 7, -7, 0, min, 5, -3, 12, -12, 9, 4});
  in["b"] = tensor<T>(t, {6}, {3, 3, -3, -3, 0, -1});
  in["c"] = tensor<T>(t, {2, 1}, {4, -5});
  in["lo"] = tensor<T>(t, {}, {-6});
  in["hi"] = tensor<T>(t, {1}, {6});
  rt::Tensor f(DType::kFloat32, {2, 6});
  for (int64_t i = 0; i < 12; ++i) f.data<float>()[i] = static_cast<float>(i) - 5.5f;
  in["f"] = f;
  return in;
}

template <typename T>
void check(DType t) {
  auto plain = make_model(t);
  auto rewritten = make_model(t);
  EXPECT_EQ(integer_ops_for_cuda(*rewritten), 9);
  for (const auto& n : rewritten->graph->nodes) {
    const bool integer = n->inputs[0]->type.dtype == t;
    EXPECT_FALSE(integer && (n->op_type == "Clip" || n->op_type == "Max" || n->op_type == "Min" ||
                             n->op_type == "Neg" || n->op_type == "Abs" || n->op_type == "Mod"))
        << n->label();
  }
  const auto want = test_util::run_on_cpu(*plain, inputs<T>(t));
  const auto got = test_util::run_on_cpu(*rewritten, inputs<T>(t));
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const rt::Tensor& g = got.at(name);
    ASSERT_EQ(g.shape(), w.shape()) << name;
    EXPECT_EQ(std::memcmp(g.raw(), w.raw(), w.nbytes()), 0) << name << " " << dtype_name(t);
  }
}

TEST(IntegerOpsForCuda, GiveTheCpuOpsBits) {
  check<int64_t>(DType::kInt64);
  check<int32_t>(DType::kInt32);
}

}  // namespace
}  // namespace ampc::passes
