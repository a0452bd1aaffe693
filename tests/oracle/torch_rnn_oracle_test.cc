// PyTorch oracle for recurrent layers (passes/recurrent_lowering.h): language models with a
// 2-layer nn.LSTM, nn.GRU or nn.RNN (bidirectional, batch_first, initial states, ReLU),
// exported by torch.onnx.export at opset 17 (tests/oracle/torch_rnn_oracle.py). The loss and
// the gradient of every parameter, from the lowering and autodiff run on the CPU backend,
// must match PyTorch's float64 within 1e-4 (relative, norm-wise; PyTorch float32 is about
// 1e-7 off). And in fp16 and bf16 the models compile for training (projections in the low
// dtype, gate math in fp32) and train for a few steps with finite losses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "passes/autodiff/autodiff.h"
#include "passes/constant_folding.h"
#include "passes/recurrent_lowering.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/npy.h"
#include "tests/oracle/oracle_util.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

constexpr double kMaxRelativeError = 1e-4;

const std::vector<std::string>& variants() {
  static const std::vector<std::string> v = {
      "lstm",     "lstm_bi",        "lstm_bf_init", "lstm_bi_bf_init", "gru",
      "gru_init", "gru_bi_bf_init", "rnn_relu",     "rnn_bi_bf_init"};
  return v;
}

// Each test exports its own variant (ctest runs every test in a process of its own).
class TorchRnnOracle : public ::testing::TestWithParam<std::string> {
 protected:
  bool export_variant(const std::string& name) {
    const std::string cmd = "/usr/bin/python3 '" + std::string(AMPC_SOURCE_DIR) +
                            "/tests/oracle/torch_rnn_oracle.py' --out '" + dir_.path().string() +
                            "' " + name + " 2>/dev/null";  // not the exporter's warnings
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::string model_path(const std::string& name) const {
    return (dir_.path() / (name + ".onnx")).string();
  }
  std::map<std::string, rt::Tensor> batch(const std::string& name) const {
    std::map<std::string, rt::Tensor> b;
    for (const char* in : {"x", "y", "h0", "c0"}) {
      const fs::path f = dir_.path() / (name + "_" + in + ".npy");
      if (fs::exists(f)) b[in] = rt::io::read_npy(f.string());
    }
    return b;
  }

  test::TempDir dir_;
};

TEST_P(TorchRnnOracle, LossAndGradients) {
  const std::string name = GetParam();
  ASSERT_TRUE(export_variant(name)) << "the oracle script failed";
  auto m = onnx_io::load_model(model_path(name));
  passes::fold_constants(*m);
  ASSERT_GT(passes::lower_recurrent_layers(*m), 0);
  passes::fold_constants(*m);
  ir::Graph& g = *m->graph;
  const auto grads = passes::differentiate(*m, {});
  for (const auto& pg : grads) {
    ir::Value* out = g.add_value("grad." + pg.parameter->name, pg.gradient->type);
    g.add_node("Identity", {pg.gradient}, {out}, "grad." + pg.parameter->name);
    g.outputs.push_back(out);
  }
  rt::cpu::Executor exec(compiler::compile_model(*m, {}, name));
  const auto outputs = exec.run(batch(name));

  const double loss_error = oracle::relative_error(
      outputs.at("loss"), rt::io::read_npy((dir_.path() / (name + ".loss.npy")).string()));
  EXPECT_LE(loss_error, kMaxRelativeError) << "loss";
  const fs::path f64 = dir_.path() / (name + ".grad");
  const fs::path f32 = dir_.path() / (name + ".grad.f32");
  size_t torch_count = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(f64)) ++torch_count;
  EXPECT_EQ(grads.size(), torch_count) << "PyTorch and ampc train different parameters";
  double worst = 0, worst_torch32 = 0;
  std::string worst_name;
  for (const auto& pg : grads) {
    const std::string& param = pg.parameter->name;
    const fs::path file = f64 / (param + ".npy");
    ASSERT_TRUE(fs::exists(file)) << "PyTorch has no parameter '" << param << "'";
    const rt::Tensor want = rt::io::read_npy(file.string());
    const rt::Tensor& got = outputs.at("grad." + param);
    ASSERT_EQ(got.shape(), want.shape()) << param;
    const double error = oracle::relative_error(got, want);
    EXPECT_LE(error, kMaxRelativeError) << "gradient of '" << param << "'";
    if (error >= worst) {
      worst = error;
      worst_name = param;
      worst_torch32 =
          oracle::relative_error(rt::io::read_npy((f32 / file.filename()).string()), want);
    }
  }
  std::printf("%s: loss error %.3g, max gradient error %.3g (%s; PyTorch float32 %.3g)\n",
              name.c_str(), loss_error, worst, worst_name.c_str(), worst_torch32);
}

INSTANTIATE_TEST_SUITE_P(Variants, TorchRnnOracle, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param; });

// The MatMuls of a lowered layer's gradient that stack_summed_matmuls wrote, of type `t`.
int stacked_gradients(const ir::Model& m, DType t) {
  int stacked = 0;
  for (const auto& n : m.graph->nodes) {
    if (n->op_type == "MatMul" && n->outputs[0]->type.dtype == t &&
        n->name.find("/lowered/") != std::string::npos &&
        n->name.find("/stacked/") != std::string::npos)
      ++stacked;
  }
  return stacked;
}

// fp16 and bf16: compiled for training with Adam, 5 steps on the batch; every loss finite.
// Autocast: the lowered projections (MatMul) compute in the low dtype, the gates (Sigmoid,
// Tanh) in fp32, and the recurrent weights' gradient sums stacked where the fp32 plan stacks them.
class TorchRnnMixedPrecision : public TorchRnnOracle {
 protected:
  int stacked_gradients_in_fp32(const std::string& name) const {
    compiler::CompileOptions options;
    options.train = true;
    onnx_io::ImportOptions import;
    import.training = true;
    auto m = onnx_io::load_model(model_path(name), import);
    compiler::compile_model(*m, options, name);
    return stacked_gradients(*m, DType::kFloat32);
  }
};

TEST_P(TorchRnnMixedPrecision, TrainsFiniteWithLowPrecisionProjections) {
  const std::string name = GetParam();
  ASSERT_TRUE(export_variant(name)) << "the oracle script failed";
  const int stacked_fp32 = stacked_gradients_in_fp32(name);
  for (auto precision : {passes::Precision::kFP16, passes::Precision::kBF16}) {
    SCOPED_TRACE(name + " " + std::string(passes::precision_name(precision)));
    compiler::CompileOptions options;
    options.train = true;
    options.optimizer.kind = "adam";
    options.optimizer.lr = 1e-2;
    options.autocast.precision = precision;
    onnx_io::ImportOptions import;
    import.training = true;
    auto m = onnx_io::load_model(model_path(name), import);
    plan::Plan plan = compiler::compile_model(*m, options, name);
    const DType low = precision == passes::Precision::kFP16 ? DType::kFloat16 : DType::kBFloat16;
    int low_matmuls = 0, fp32_gates = 0;
    for (const auto& n : m->graph->nodes) {
      if (n->name.find("/lowered/") == std::string::npos) continue;
      if (n->op_type == "MatMul" && n->outputs[0]->type.dtype == low) ++low_matmuls;
      if (n->op_type == "Sigmoid" || n->op_type == "Tanh") {
        EXPECT_EQ(n->outputs[0]->type.dtype, DType::kFloat32) << n->name;
        ++fp32_gates;
      }
    }
    EXPECT_GT(low_matmuls, 0);
    EXPECT_GT(fp32_gates, 0);
    // The recurrent weights' gradients: one product over the time steps, rounded once, as
    // PyTorch's RNN call computes them; stacked wherever the fp32 plan stacks them
    // (passes/summed_matmuls.h).
    EXPECT_EQ(stacked_gradients(*m, low), stacked_fp32);
    rt::cpu::Executor exec(std::move(plan));
    const auto b = batch(name);
    for (int step = 0; step < 5; ++step) {
      const auto out = exec.run(b);
      const rt::Tensor& loss = out.at("loss");
      const double v = loss.dtype() == DType::kFloat32 ? loss.data<float>()[0] : 0.0;
      EXPECT_TRUE(std::isfinite(v)) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, TorchRnnMixedPrecision,
                         ::testing::Values("lstm_bi_bf_init", "gru_bi", "rnn_bi_bf"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ampc

namespace ampc {
namespace {

// What the lowering refuses, with one message naming the node.
std::string lowering_error(int64_t opset, std::vector<int64_t> x_shape,
                           std::vector<std::string> activations) {
  ir::Model m;
  m.opsets = {{"", opset}};
  ir::Graph& g = *m.graph;
  auto input = [&](const char* name, std::vector<int64_t> shape) {
    ir::Value* v = g.add_value(name, {DType::kFloat32, std::move(shape)});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  };
  ir::Value* x = input("X", std::move(x_shape));
  ir::Value* w = input("W", {1, 8, 3});
  ir::Value* r = input("R", {1, 8, 2});
  ir::Value* y_h = g.add_value("Y_h", {DType::kFloat32, std::vector<int64_t>{1, 1, 2}});
  ir::Value* y = g.add_value("Y", {DType::kFloat32, std::vector<int64_t>{2, 1, 1, 2}});
  ir::Node* n = g.add_node("LSTM", {x, w, r}, {y, y_h}, "lstm");
  n->attributes.push_back(ir::Attribute::make_int("hidden_size", 2));
  if (!activations.empty()) {
    ir::Attribute a;
    a.name = "activations";
    a.kind = ir::AttrKind::kStrings;
    a.strings = std::move(activations);
    n->attributes.push_back(std::move(a));
  }
  g.outputs.push_back(y_h);
  try {
    passes::lower_recurrent_layers(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "lowered";
}

TEST(RecurrentLowering, RefusalsNameTheNode) {
  EXPECT_EQ(lowering_error(17, {2, 1, 3}, {}), "lowered");
  EXPECT_EQ(lowering_error(17, {2, 1, 3}, {"sigmoid", "tanh", "softsign"}), "lowered");
  EXPECT_EQ(lowering_error(17, {2, 1, 3}, {"Sigmoid", "Tanh", "Gelu"}),
            "node 'lstm' (LSTM): activation 'Gelu' is not one the ONNX spec lists");
  EXPECT_EQ(lowering_error(17, {-1, 1, 3}, {}),
            "node 'lstm' (LSTM): lowering needs a static sequence length and batch; X is "
            "f32[?,1,3]");
  EXPECT_EQ(lowering_error(12, {2, 1, 3}, {}),
            "node 'lstm' (LSTM): recurrent layers are lowered for opset 13 and later; the "
            "model imports opset 12");
  EXPECT_EQ(lowering_error(17, {2, 1, 3}, {"Sigmoid"}),
            "node 'lstm' (LSTM): expected 3 activations, got 1");
}

}  // namespace
}  // namespace ampc
