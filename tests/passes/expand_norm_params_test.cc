// expand_norm_params (passes/expand_norm_params.h): a LayerNormalization whose scale and bias
// broadcast to the normalised shape gets them expanded to it, so the compiled plan's step has
// full-shape operands (what the CUDA kernel reads), and the compiled model still computes the
// layer norm with broadcast parameters, against a float64 reference written out here. The
// gradient through the inserted Expand is checked against finite differences by
// autodiff_fd_norm_random_test (fd_check applies this pass as the pipeline does).
#include "passes/expand_norm_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"
#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

ir::Value* constant(ir::Graph& g, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<double>& values) {
  ir::Tensor t = ir::tensor_of<float>(DType::kFloat64, DType::kFloat64, dims, values);
  ir::Value* v = g.add_value(name, {DType::kFloat64, dims});
  t.name = name;
  v->initializer = std::make_unique<ir::Tensor>(std::move(t));
  g.initializers.push_back(v);
  return v;
}

// y = LayerNormalization(x [2, 3, 4], scale [1], bias [4], axis -2): normalised shape [3, 4].
struct Fixture {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;
  std::vector<double> xs, bias = {0.5, -1.0, 0.25, 2.0};
  double scale = 1.5;
  ir::Node* norm = nullptr;

  Fixture() {
    for (int i = 0; i < 24; ++i) xs.push_back(std::sin(1.7 * i) + 0.1 * i);
    ir::Value* x = g.add_value("x", {DType::kFloat64, std::vector<int64_t>{2, 3, 4}});
    g.inputs.push_back(x);
    ir::Value* s = constant(g, "scale", {1}, {scale});
    ir::Value* b = constant(g, "bias", {4}, bias);
    ir::Value* y = g.add_value("y", {DType::kFloat64, std::vector<int64_t>{2, 3, 4}});
    norm = g.add_node("LayerNormalization", {x, s, b}, {y}, "ln");
    norm->attributes.push_back(ir::Attribute::make_int("axis", -2));
    g.outputs.push_back(y);
  }
};

TEST(ExpandNormParams, BroadcastScaleAndBiasBecomeFullShape) {
  Fixture f;
  EXPECT_EQ(expand_norm_params(*f.model), 2);
  for (int k = 1; k <= 2; ++k) {
    ASSERT_NE(f.norm->inputs[k]->producer, nullptr);
    EXPECT_EQ(f.norm->inputs[k]->producer->op_type, "Expand");
    EXPECT_EQ(*f.norm->inputs[k]->type.shape, (std::vector<int64_t>{3, 4}));
  }
  EXPECT_EQ(expand_norm_params(*f.model), 0);  // full-shape operands are left alone
}

TEST(ExpandNormParams, CompiledModelComputesTheBroadcastLayerNorm) {
  Fixture f;
  rt::cpu::Executor exec(compiler::compile_model(*f.model, {}, "ln"));
  rt::Tensor x(DType::kFloat64, {2, 3, 4});
  for (int i = 0; i < 24; ++i) x.data<double>()[i] = f.xs[i];
  const rt::Tensor y = exec.run({{"x", x}}).at("y");
  ASSERT_EQ(y.numel(), 24);
  for (int row = 0; row < 2; ++row) {
    double mean = 0, var = 0;
    for (int j = 0; j < 12; ++j) mean += f.xs[row * 12 + j] / 12;
    for (int j = 0; j < 12; ++j) var += std::pow(f.xs[row * 12 + j] - mean, 2) / 12;
    for (int j = 0; j < 12; ++j) {
      const double want =
          (f.xs[row * 12 + j] - mean) / std::sqrt(var + 1e-5) * f.scale + f.bias[j % 4];
      EXPECT_NEAR(y.data<double>()[row * 12 + j], want, 1e-12) << row << " " << j;
    }
  }
}

}  // namespace
}  // namespace ampc::passes
