// Autocast on the example models (forward graph, and the full training pipeline) in fp16
// and bf16: which ops compute in which dtype, one Cast per parameter per dtype, no
// foldable Cast left, verifier and ONNX checker; and the user's overrides.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/export_training.h"
#include "frontend/onnx/import.h"
#include "ir/verifier.h"
#include "passes/autocast.h"
#include "passes/cast_cleanup.h"
#include "passes/constant_folding.h"
#include "passes/lower_grid_sample.h"
#include "passes/precision_policy.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

using passes::Precision;
using ::testing::HasSubstr;

// Options for `p` with the overrides `edit` sets.
passes::AutocastOptions opts(Precision p, void (*edit)(passes::AutocastOptions&) = nullptr) {
  passes::AutocastOptions o;
  o.precision = p;
  if (edit) edit(o);
  return o;
}

std::string model_path(const std::string& name) {
  return std::string(AMPC_SOURCE_DIR) + "/models/" + name + ".onnx";
}

bool is_default_domain(const ir::Node& n) {
  return n.domain.empty() || n.domain == "ai.onnx";
}

bool is_low_op(const std::string& op) {
  return op == "MatMul" || op == "Gemm" || op == "Conv";
}

bool is_fp32_op(const std::string& op) {
  return op == "Softmax" || op == "LayerNormalization" || op.rfind("Reduce", 0) == 0 ||
         op == "SoftmaxCrossEntropyLoss";
}

// The dtype a node computes in: its first float input (what autocast cast for it).
DType compute_dtype(const ir::Node& n) {
  for (const ir::Value* v : n.inputs) {
    if (v && is_float(v->type.dtype)) return v->type.dtype;
  }
  return DType::kUndefined;
}

DType cast_to(const ir::Node& n) {
  return static_cast<DType>(n.attr("to")->i);
}

// The structure every mixed-precision graph must have. `forward_names`: the nodes of the
// input model (the checks on ALLOW/DENY ops apply to them; the backward is checked for
// casts only, as its ops run in the dtype their forward ran in).
void expect_mixed_structure(const ir::Model& m, DType low, const std::set<std::string>& forward) {
  const ir::Graph& g = *m.graph;
  int low_ops = 0;
  for (const auto& n : g.nodes) {
    // ONNX's Conv and pooling ops have no bfloat16 in libonnx 1.12's opsets: in bf16
    // autocast uses ampc.Conv, ampc.MaxPool, ampc.AveragePool and ampc.GlobalAveragePool, the
    // same ops with bfloat16 allowed. A pooling follows its input, which in these models is
    // the low output of a convolution's block.
    const bool twin_op = n->op_type == "Conv" || n->op_type == "MaxPool" ||
                         n->op_type == "AveragePool" || n->op_type == "GlobalAveragePool";
    const bool ampc_twin = n->domain == "ampc" && twin_op;
    if ((!is_default_domain(*n) && !ampc_twin) || !forward.count(n->name)) continue;
    if (twin_op) {
      EXPECT_EQ(ampc_twin, low == DType::kBFloat16) << n->label();
      EXPECT_EQ(compute_dtype(*n), low) << n->label();
      EXPECT_EQ(n->outputs[0]->type.dtype, low) << n->label();
    }
    if (is_low_op(n->op_type)) {
      ++low_ops;
      EXPECT_EQ(compute_dtype(*n), low) << n->label();
      EXPECT_EQ(n->outputs[0]->type.dtype, low) << n->label();
    }
    if (is_fp32_op(n->op_type)) {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat32) << n->label();
      EXPECT_EQ(n->outputs[0]->type.dtype, DType::kFloat32) << n->label();
    }
  }
  EXPECT_GT(low_ops, 0);
  // Parameters: fp32 masters, at most one Cast per target dtype; every one that feeds a
  // low op through a Cast has exactly one. A training step keeps the cast as a copy the
  // optimizer writes (passes/weight_copies.h): it counts as the cast.
  int parameter_casts = 0;
  for (const ir::Value* p : g.initializers) {
    if (!p->from_model || !is_float(p->type.dtype)) continue;
    EXPECT_EQ(p->type.dtype, DType::kFloat32) << p->name;
    std::map<DType, int> casts;
    for (const ir::Use& u : p->uses) {
      if (u.node->op_type == "Cast") ++casts[cast_to(*u.node)];
    }
    for (const auto& c : m.rounded_copies) {
      if (c.master == p) ++casts[c.copy->type.dtype];
    }
    for (const auto& [to, count] : casts) EXPECT_EQ(count, 1) << p->name << " -> " << int(to);
    parameter_casts += casts[low];
  }
  EXPECT_GT(parameter_casts, 0);
  // Graph outputs (the loss) as the model declares them.
  for (const ir::Value* o : g.outputs) EXPECT_EQ(o->type.dtype, DType::kFloat32) << o->name;
  // Nothing left for cast cleanup.
  for (const auto& n : g.nodes) {
    if (n->op_type != "Cast") continue;
    const ir::Value* in = n->inputs[0];
    const bool pinned = passes::is_pinned_value(m, n->outputs[0]);
    if (!pinned) {
      EXPECT_NE(in->type.dtype, cast_to(*n)) << "no-op " << n->label();
    }
    const ir::Node* p = in->producer;
    if (p && p->op_type == "Cast") {
      EXPECT_FALSE(passes::dtype_holds(in->type.dtype, p->inputs[0]->type.dtype))
          << "foldable pair " << p->label() << " -> " << n->label();
    }
  }
}

std::set<std::string> node_names(const ir::Model& m) {
  std::set<std::string> names;
  for (const auto& n : m.graph->nodes) names.insert(n->name);
  return names;
}

struct Case {
  const char* model;
  Precision precision;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.model) + "_" +
         std::string(passes::precision_name(info.param.precision));
}

class AutocastModels : public ::testing::TestWithParam<Case> {};

TEST_P(AutocastModels, ForwardGraph) {
  auto model = onnx_io::load_model(model_path(GetParam().model));
  passes::fold_constants(*model);
  const auto forward = node_names(*model);
  const size_t node_count = model->graph->nodes.size();
  auto gemms = [&] {
    size_t n = 0;
    for (const auto& node : model->graph->nodes) n += node->op_type == "Gemm";
    return n;
  };
  const size_t gemms_before = gemms();
  const passes::AutocastOptions options = opts(GetParam().precision);
  const auto report = compiler::autocast_forward(*model, options);
  const DType low = passes::precision_dtype(GetParam().precision);

  expect_mixed_structure(*model, low, forward);
  ir::verify(*model);
  EXPECT_NO_THROW(onnx_io::check_model(onnx_io::export_model(*model)));

  // The report: every node of the model, and every Cast with what it moves. A linear layer on a
  // 3-D input (MatMul, Add) became three nodes (Reshape, Gemm, Reshape; linear_as_gemm.h).
  const size_t linears = gemms() - gemms_before;
  if (std::string(GetParam().model) == "gpt") {
    EXPECT_GT(linears, 0u);
  }
  EXPECT_EQ(report.nodes.size(), node_count + linears);
  for (const auto& n : report.nodes) EXPECT_FALSE(n.rule.empty()) << n.node;
  ASSERT_FALSE(report.casts.empty());
  int64_t total = 0;
  for (const auto& c : report.casts) {
    ASSERT_GT(c.numel, 0) << c.value;
    EXPECT_EQ(c.bytes_moved, c.numel * int64_t(dtype_size(c.from) + dtype_size(c.to)));
    total += c.bytes_moved;
  }
  EXPECT_EQ(report.total_cast_bytes(), total);
  int casts_in_graph = 0;
  for (const auto& n : model->graph->nodes) casts_in_graph += n->op_type == "Cast";
  EXPECT_LE(report.casts.size(), size_t(casts_in_graph));  // the model's own Casts too
}

TEST_P(AutocastModels, TrainingPipeline) {
  compiler::CompileOptions options;
  options.train = true;
  options.autocast.precision = GetParam().precision;
  auto model = compiler::load_for_compile(model_path(GetParam().model), options);
  const auto forward = node_names(*model);
  passes::AutocastReport report;
  const plan::Plan plan = compiler::compile_model(*model, options, GetParam().model, &report);
  EXPECT_FALSE(report.casts.empty());
  EXPECT_GT(plan.steps_size(), 0);

  const DType low = passes::precision_dtype(GetParam().precision);
  expect_mixed_structure(*model, low, forward);
  // fp32 master weights receive fp32 gradients: every state update writes fp32.
  for (const auto& u : model->state_updates) {
    if (is_float(u.target->type.dtype)) {
      EXPECT_EQ(u.source->type.dtype, u.target->type.dtype) << u.target->name;
    }
  }
  ir::verify(*model);
  EXPECT_NO_THROW(onnx_io::check_model(onnx_io::export_training_model(*model)));
}

INSTANTIATE_TEST_SUITE_P(
    Models, AutocastModels,
    ::testing::Values(Case{"mlp", Precision::kFP16}, Case{"mlp", Precision::kBF16},
                      Case{"cnn", Precision::kFP16}, Case{"cnn", Precision::kBF16},
                      Case{"gpt", Precision::kFP16}, Case{"gpt", Precision::kBF16}),
    case_name);

// Autocast with `options` on a model; returns the report and leaves the model in `out`.
passes::AutocastReport run(const std::string& name, const passes::AutocastOptions& options,
                           std::unique_ptr<ir::Model>* out = nullptr) {
  auto model = onnx_io::load_model(model_path(name));
  passes::fold_constants(*model);
  auto report = compiler::autocast_forward(*model, options);
  ir::verify(*model);
  if (out) *out = std::move(model);
  return report;
}

const passes::AutocastReport::NodeDecision* decision(const passes::AutocastReport& r,
                                                     const std::string& label_part) {
  for (const auto& n : r.nodes) {
    if (n.node.find(label_part) != std::string::npos) return &n;
  }
  return nullptr;
}

TEST(PrecisionPolicyTable, ClassesOfAmpSemantics) {
  using passes::OpClass;
  using passes::PrecisionPolicy;
  for (const char* op : {"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "LSTM"})
    EXPECT_EQ(PrecisionPolicy::table_class(op), OpClass::kAllow) << op;
  for (const char* op : {"Exp", "Log", "Pow", "Softmax", "LogSoftmax", "LayerNormalization",
                         "ReduceSum", "ReduceMean", "ReduceLogSumExp", "CumSum",
                         "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "Resize"})
    EXPECT_EQ(PrecisionPolicy::table_class(op), OpClass::kDeny) << op;
  for (const char* op : {"Add", "Mul", "Relu", "Erf", "Tanh", "Dropout", "MaxPool", "Reshape",
                         "Transpose", "Concat", "Gather", "Where", "BatchNormalization"})
    EXPECT_EQ(PrecisionPolicy::table_class(op), OpClass::kFollow) << op;
  EXPECT_EQ(PrecisionPolicy::table_class("Cast"), OpClass::kKeep);
}

TEST(AutocastOverrides, DenyKeepsMatMulInFp32) {
  std::unique_ptr<ir::Model> model;
  const auto report =
      run("gpt", opts(Precision::kFP16, [](auto& o) { o.deny = {"MatMul"}; }), &model);
  int matmuls = 0;
  for (const auto& n : model->graph->nodes) {
    if (n->op_type != "MatMul") continue;
    ++matmuls;
    EXPECT_EQ(compute_dtype(*n), DType::kFloat32) << n->label();
  }
  EXPECT_GT(matmuls, 0);
  for (const auto& n : report.nodes) {
    if (n.op_type == "MatMul") {
      EXPECT_EQ(n.rule, "DENY (--deny MatMul)");
    }
  }
}

TEST(AutocastOverrides, KeepFp32PinsNodesByName) {
  std::unique_ptr<ir::Model> model;
  const auto report =
      run("mlp", opts(Precision::kBF16, [](auto& o) { o.keep_fp32 = {"/fc1/*"}; }), &model);
  for (const auto& n : model->graph->nodes) {
    if (n->name == "/fc1/Gemm") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat32);
    }
    if (n->name == "/fc2/Gemm") {
      EXPECT_EQ(compute_dtype(*n), DType::kBFloat16);
    }
  }
  const auto* d = decision(report, "/fc1/Gemm");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->compute_dtype, DType::kFloat32);
  EXPECT_THAT(d->rule, HasSubstr("--keep-fp32 '/fc1/*'"));
}

// A region the PyTorch forward ran under torch.autocast(enabled=False), listed by ampc's
// exporter under kAutocastDisabledKey, stays fp32; the rest follows the table.
TEST(AutocastOverrides, AutocastDisabledRegionStaysFp32) {
  auto model = onnx_io::load_model(model_path("mlp"));
  passes::fold_constants(*model);
  model->metadata.push_back({passes::kAutocastDisabledKey, "*/nothing/*\n/fc1/*"});
  const auto report = compiler::autocast_forward(*model, opts(Precision::kFP16));
  ir::verify(*model);
  for (const auto& n : model->graph->nodes) {
    if (n->name == "/fc1/Gemm") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat32);
    }
    if (n->name == "/fc2/Gemm") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat16);
    }
  }
  const auto* d = decision(report, "/fc1/Gemm");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->rule, HasSubstr("torch.autocast(enabled=False)"));
  const auto* other = decision(report, "/fc2/Gemm");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->compute_dtype, DType::kFloat16);
}

// GridSample, lowered into gathers and weights before autocast, stays fp32 as PyTorch's
// autocast computes grid_sampler (its coordinates in fp16 would move in steps of 0.25 at 300),
// though its image comes from an fp16 convolution; the convolution stays fp16.
TEST(AutocastOverrides, LoweredGridSampleStaysFp32) {
  ir::Model m;
  m.opsets.push_back({"", 17});
  ir::Graph& g = *m.graph;
  auto input = [&g](const std::string& name, std::vector<int64_t> shape) {
    ir::Value* v = g.add_value(name, {DType::kFloat32, std::move(shape)});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  };
  ir::Value* x = input("x", {1, 1, 4, 4});
  ir::Value* grid = input("grid", {1, 2, 2, 2});
  ir::Value* w = g.add_value("w", {DType::kFloat32, std::vector<int64_t>{1, 1, 1, 1}});
  w->initializer = std::make_unique<ir::Tensor>(
      ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, {1, 1, 1, 1}, std::vector<double>{2}));
  w->initializer->name = "w";
  w->from_model = true;
  g.initializers.push_back(w);
  ir::Value* h = g.add_value("h", {DType::kFloat32, std::vector<int64_t>{1, 1, 4, 4}});
  g.add_node("Conv", {x, w}, {h}, "conv");
  ir::Value* y = g.add_value("y", {DType::kFloat32, std::vector<int64_t>{1, 1, 2, 2}});
  g.add_node("GridSample", {h, grid}, {y}, "sample");
  ir::Value* loss = g.add_value("loss", {DType::kFloat32, std::vector<int64_t>{}});
  g.add_node("ReduceSum", {y}, {loss}, "sum")
      ->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
  g.outputs.push_back(loss);
  ASSERT_EQ(passes::lower_grid_sample(m), 1);
  const auto report = passes::apply_autocast(m, opts(Precision::kFP16));
  ir::verify(m);
  int lowered = 0;
  for (const auto& n : g.nodes) {
    if (n->name == "conv") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat16);
    }
    if (n->name.rfind("sample/lowered/", 0) != 0) continue;
    const DType t = compute_dtype(*n);
    if (t != DType::kUndefined) {
      EXPECT_EQ(t, DType::kFloat32) << n->label();
    }
    ++lowered;
  }
  EXPECT_GT(lowered, 20);
  const auto* d = decision(report, "sample/lowered/Gather");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->rule, HasSubstr("lowered GridSample, fp32 in PyTorch's autocast"));
}

TEST(AutocastOverrides, AllowMovesAnOpToTheLowDtype) {
  const auto report =
      run("mlp", opts(Precision::kFP16, [](auto& o) { o.allow = {"LayerNormalization"}; }));
  const auto* d = decision(report, "LayerNormalization");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->compute_dtype, DType::kFloat16);
  EXPECT_EQ(d->rule, "ALLOW (--allow LayerNormalization)");
}

TEST(AutocastOverrides, UnknownOpIsAnErrorNamingIt) {
  for (const auto& options : {opts(Precision::kFP32, [](auto& o) { o.deny = {"MatMull"}; }),
                              opts(Precision::kFP16, [](auto& o) { o.allow = {"MatMull"}; })}) {
    try {
      run("mlp", options);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("'MatMull'"));
    }
  }
}

TEST(AutocastOverrides, OpInTwoClassesIsAnError) {
  try {
    run("mlp", opts(Precision::kFP16, [](auto& o) { o.allow = o.deny = {"Gemm"}; }));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'Gemm'"));
  }
}

passes::AutocastOptions policy(const std::string& path) {
  passes::AutocastOptions o = opts(Precision::kFP16);
  o.policy_file = path;
  return o;
}

TEST(AutocastOverrides, PolicyFile) {
  test::TempDir dir;
  const std::string path = dir / "policy.json";
  std::ofstream(path) << R"({"deny": ["Gemm"], "keep_fp32": ["/act/*"]})";
  std::unique_ptr<ir::Model> model;
  const auto report = run("mlp", policy(path), &model);
  for (const auto& n : model->graph->nodes) {
    if (n->op_type == "Gemm") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat32) << n->label();
    }
  }
  const auto* d = decision(report, "/fc1/Gemm");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->rule, "DENY (policy file 'deny' Gemm)");
  EXPECT_THAT(decision(report, "/act/Erf")->rule, HasSubstr("--keep-fp32 '/act/*'"));

  std::ofstream(path) << R"({"deny": ["Softmaxx"]})";
  try {
    run("mlp", policy(path));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'Softmaxx'"));
  }
  std::ofstream(path) << R"({"deny": ["Gemm"], "denny": []})";
  EXPECT_THROW(run("mlp", policy(path)), Error);
}

TEST(AutocastRules, BatchNormalizationKeepsStatisticsInFp32) {
  std::unique_ptr<ir::Model> model;
  run("cnn", opts(Precision::kFP16), &model);
  int bns = 0;
  for (const auto& n : model->graph->nodes) {
    if (n->op_type != "BatchNormalization") continue;
    ++bns;
    EXPECT_EQ(n->inputs[0]->type.dtype, DType::kFloat16) << n->label();
    for (size_t i = 1; i < n->inputs.size(); ++i)
      EXPECT_EQ(n->inputs[i]->type.dtype, DType::kFloat32) << n->label() << " input " << i;
  }
  EXPECT_EQ(bns, 2);
}

TEST(AutocastRules, BatchNormalizationBelowOpset15StaysFp32) {
  auto model = onnx_io::load_model(model_path("cnn"));
  for (auto& o : model->opsets) {
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = 14;
  }
  passes::fold_constants(*model);
  const auto report = compiler::autocast_forward(*model, opts(Precision::kFP16));
  ir::verify(*model);
  for (const auto& n : model->graph->nodes) {
    if (n->op_type == "BatchNormalization") {
      EXPECT_EQ(compute_dtype(*n), DType::kFloat32);
    }
  }
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_THAT(report.notes[0], HasSubstr("BatchNormalization"));
}

// A parameter's initial values: small, varied, not all of one sign.
ir::Value* add_parameter(ir::Graph& g, const std::string& name, std::vector<int64_t> shape) {
  ir::Value* p = g.add_value(name, {DType::kFloat32, shape});
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01 * static_cast<double>(i % 7) - 0.03;
  p->initializer = std::make_unique<ir::Tensor>(
      ir::tensor_of<float>(DType::kFloat32, DType::kFloat64, shape, values));
  p->initializer->name = name;
  p->from_model = true;
  g.initializers.push_back(p);
  return p;
}

// x [2, 3, 8, 8] -> Conv (4 channels) -> what `head` adds -> ReduceSum -> loss.
std::unique_ptr<ir::Model> conv_model(
    const std::function<ir::Value*(ir::Graph&, ir::Value*)>& head) {
  auto m = std::make_unique<ir::Model>();
  m->opsets.push_back({"", 17});
  ir::Graph& g = *m->graph;
  g.name = "small";
  ir::Value* x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{2, 3, 8, 8}});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  ir::Value* h = g.add_value("h", {DType::kFloat32, std::vector<int64_t>{2, 4, 8, 8}});
  g.add_node("Conv", {x, add_parameter(g, "w1", {4, 3, 3, 3})}, {h}, "conv")
      ->attributes.push_back(ir::Attribute::make_ints("pads", {1, 1, 1, 1}));
  ir::Value* y = head(g, h);
  ir::Value* loss = g.add_value("loss", {DType::kFloat32, std::vector<int64_t>{}});
  g.add_node("ReduceSum", {y}, {loss}, "sum")
      ->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
  g.outputs.push_back(loss);
  return m;
}

// A decoder's upsampling: ConvTranspose, strided, with a bias.
ir::Value* upsampling(ir::Graph& g, ir::Value* h) {
  ir::Value* y = g.add_value("y", {DType::kFloat32, std::vector<int64_t>{2, 2, 16, 16}});
  ir::Node* up =
      g.add_node("ConvTranspose",
                 {h, add_parameter(g, "w2", {4, 2, 4, 4}), add_parameter(g, "b2", {2})}, {y}, "up");
  up->attributes.push_back(ir::Attribute::make_ints("strides", {2, 2}));
  up->attributes.push_back(ir::Attribute::make_ints("pads", {1, 1, 1, 1}));
  return y;
}

// MobileNet v3's activations and a CELU: HardSwish, a squeeze-excite's HardSigmoid gate, Celu.
ir::Value* activations(ir::Graph& g, ir::Value* h) {
  auto value = [&g](const std::string& name) {
    return g.add_value(name, {DType::kFloat32, std::vector<int64_t>{2, 4, 8, 8}});
  };
  ir::Value* a = value("a");
  g.add_node("HardSwish", {h}, {a}, "hardswish");
  ir::Value* gate = value("gate");
  g.add_node("HardSigmoid", {a}, {gate}, "hardsigmoid")
      ->attributes.push_back(ir::Attribute::make_float("alpha", 0.25f));
  ir::Value* gated = value("gated");
  g.add_node("Mul", {a, gate}, {gated}, "gated");
  ir::Value* c = value("c");
  g.add_node("Celu", {gated}, {c}, "celu");
  return c;
}

// compile_model's training pipeline on `model` in precision `p`.
void compile_for_training(ir::Model& model, Precision p) {
  compiler::CompileOptions options;
  options.train = true;
  options.autocast.precision = p;
  (void)compiler::compile_model(model, options, "small");
}

// ONNX's ConvTranspose has no bfloat16 up to opset 17: a bf16 plan's transposed convolution is
// ampc.ConvTranspose, computing in bf16 as torch's conv_transpose2d does under autocast, and
// the Conv that is its input gradient is ampc.Conv. fp16 plans keep ONNX's ops.
TEST(AutocastRules, ConvTransposeComputesInTheLowDtype) {
  for (const Precision p : {Precision::kBF16, Precision::kFP16}) {
    const DType low = passes::precision_dtype(p);
    const std::string want_domain = p == Precision::kBF16 ? "ampc" : "";
    auto model = conv_model(upsampling);
    compile_for_training(*model, p);
    int forward = 0, input_gradients = 0;
    for (const auto& n : model->graph->nodes) {
      if (n->name == "up") {
        ++forward;
        EXPECT_EQ(n->op_type, "ConvTranspose");
        EXPECT_EQ(n->domain, want_domain);
        EXPECT_EQ(compute_dtype(*n), low);
        EXPECT_EQ(n->outputs[0]->type.dtype, low);
      } else if (n->op_type == "Conv" && n->name.find("up") != std::string::npos) {
        ++input_gradients;
        EXPECT_EQ(n->domain, want_domain) << n->label();
        EXPECT_EQ(compute_dtype(*n), low) << n->label();
      }
    }
    EXPECT_EQ(forward, 1);
    EXPECT_EQ(input_gradients, 1);
    ir::verify(*model);
    EXPECT_NO_THROW(onnx_io::check_model(onnx_io::export_training_model(*model)));
  }
}

// ONNX's HardSwish, HardSigmoid and Celu have no bfloat16 up to opset 17 (Celu no float16
// either): where a plan's low dtype is missing, autocast writes their ampc forms, which compute
// in it as PyTorch's hardswish, hardsigmoid and celu follow their input under autocast; their
// gradients are ONNX's ops in the low dtype.
TEST(AutocastRules, ActivationsWithoutLowSchemasComputeInTheLowDtype) {
  for (const Precision p : {Precision::kBF16, Precision::kFP16}) {
    const DType low = passes::precision_dtype(p);
    const bool bf16 = p == Precision::kBF16;
    const std::map<std::string, std::string> domain_of = {
        {"hardswish", bf16 ? "ampc" : ""}, {"hardsigmoid", bf16 ? "ampc" : ""}, {"celu", "ampc"}};
    auto model = conv_model(activations);
    compile_for_training(*model, p);
    int seen = 0;
    for (const auto& n : model->graph->nodes) {
      const auto it = domain_of.find(n->name);
      if (it == domain_of.end()) continue;
      ++seen;
      EXPECT_EQ(n->domain, it->second) << n->label();
      EXPECT_EQ(compute_dtype(*n), low) << n->label();
      EXPECT_EQ(n->outputs[0]->type.dtype, low) << n->label();
    }
    EXPECT_EQ(seen, 3);
    ir::verify(*model);
    EXPECT_NO_THROW(onnx_io::check_model(onnx_io::export_training_model(*model)));
  }
}

TEST(AutocastRules, Fp32IsANoOp) {
  auto model = onnx_io::load_model(model_path("mlp"));
  passes::fold_constants(*model);
  const std::string before = std::to_string(model->graph->nodes.size());
  const auto report = compiler::autocast_forward(*model, {});
  EXPECT_TRUE(report.nodes.empty());
  EXPECT_TRUE(report.casts.empty());
  EXPECT_EQ(std::to_string(model->graph->nodes.size()), before);
}

TEST(AutocastRules, TrainingFormatModelIsRefused) {
  auto model = onnx_io::load_model(model_path("mlp"));
  model->state_updates.push_back({model->graph->initializers[0], model->graph->initializers[0]});
  EXPECT_THROW(passes::apply_autocast(*model, opts(Precision::kFP16)), Error);
}

}  // namespace
}  // namespace ampc
