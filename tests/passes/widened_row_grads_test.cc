// read_row_grads_widened (passes/widened_row_grads.h): ampc.SoftmaxGrad(Cast(dY, float), Y) and
// ampc.LayerNormalizationGrad(Cast(dY, float), X, scale) of a float16 or bfloat16 dY read it
// widened; Casts read elsewhere or kept, or from another type, stay. The folded ops against the
// formulas in double on the 16-bit dY; a bf16 training plan of a LayerNorm -> Softmax -> linear
// classifier, CPU and CUDA, has no Cast step feeding either backward, and its precision report
// has both computing in float32. (The kernels' bits:
// TwinRowwise.WidenedRowGrads*.)
#include "passes/widened_row_grads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "ops/schemas/ampc_schemas.h"
#include "report/plan_precision.h"
#include "tests/passes/widened_test_util.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;
using test_util::float_tensor;

constexpr int64_t kRows = 3, kCols = 8;

// dy [3, 8] of `dy_type` -> Cast(float) -> ampc.SoftmaxGrad(., y) or
// ampc.LayerNormalizationGrad(., x, scale) -> dx (and dscale, dbias); y / x, scale: float inputs.
struct GradGraph {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* dy = nullptr;
  ir::Value* cast_out = nullptr;
  ir::Node* grad = nullptr;

  GradGraph(const std::string& op, DType dy_type) {
    ops::register_ampc_schemas();
    model->opsets.push_back({"", 17});
    model->opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
    model->graph->name = "grad";
    ir::Graph& g = *model->graph;
    dy = input("dy", dy_type, {kRows, kCols});
    cast_out = g.add_value("dy_wide", {DType::kFloat32, Shape{kRows, kCols}});
    ir::Node* cast = g.add_node("Cast", {dy}, {cast_out}, "cast");
    cast->attributes.push_back(
        ir::Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32)));
    ir::Value* dx = g.add_value("dx", {DType::kFloat32, Shape{kRows, kCols}});
    if (op == "SoftmaxGrad") {
      grad = g.add_node("SoftmaxGrad", {cast_out, input("y", DType::kFloat32, {kRows, kCols})},
                        {dx}, "softmax_grad");
    } else {
      ir::Value* ds = g.add_value("dscale", {DType::kFloat32, Shape{kCols}});
      ir::Value* db = g.add_value("dbias", {DType::kFloat32, Shape{kCols}});
      grad = g.add_node("LayerNormalizationGrad",
                        {cast_out, input("x", DType::kFloat32, {kRows, kCols}),
                         input("scale", DType::kFloat32, {kCols})},
                        {dx, ds, db}, "layer_norm_grad");
      g.outputs.push_back(ds);
      g.outputs.push_back(db);
    }
    grad->domain = ops::kAmpcDomain;
    g.outputs.insert(g.outputs.begin(), dx);
  }

  ir::Value* input(const std::string& name, DType t, Shape shape) {
    return test_util::add_input(*model->graph, name, std::move(shape), t);
  }

  bool has_cast() const { return test_util::has_cast(*model); }
};

// Values that 16-bit types hold exactly.
std::vector<double> dyadic(size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>(int64_t((i * 7 + seed) % 23) - 11) / 8;
  return v;
}

void expect_near_all(const rt::Tensor& got, const std::vector<double>& want,
                     const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::kFloat32) << what;
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.data<float>()[i], want[i], 2e-6 * std::max(1.0, std::abs(want[i])))
        << what << " element " << i;
  }
}

TEST(WidenedRowGrads, SoftmaxGradReads16BitDyAndIsTheFormulas) {
  // y: each row a softmax of dyadic scores, in float.
  std::vector<double> y(kRows * kCols);
  const std::vector<double> s = dyadic(y.size(), 3);
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < kCols; ++j) sum += std::exp(s[r * kCols + j]);
    for (int64_t j = 0; j < kCols; ++j) y[r * kCols + j] = std::exp(s[r * kCols + j]) / sum;
  }
  const rt::Tensor yt = float_tensor(DType::kFloat32, y, {kRows, kCols});
  std::vector<double> yf(y.size());  // y as the op sees it: rounded to float
  for (size_t i = 0; i < y.size(); ++i) yf[i] = yt.data<float>()[i];
  const std::vector<double> dy = dyadic(y.size(), 5);
  std::vector<double> want(y.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double dot = 0;
    for (int64_t j = 0; j < kCols; ++j) dot += dy[r * kCols + j] * yf[r * kCols + j];
    for (int64_t j = 0; j < kCols; ++j)
      want[r * kCols + j] = yf[r * kCols + j] * (dy[r * kCols + j] - dot);
  }
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    GradGraph gg("SoftmaxGrad", t);
    EXPECT_EQ(read_row_grads_widened(*gg.model), 1);
    EXPECT_EQ(gg.grad->inputs[0], gg.dy);
    EXPECT_FALSE(gg.has_cast());
    auto out =
        test_util::run_on_cpu(*gg.model, {{"dy", float_tensor(t, dy, {kRows, kCols})}, {"y", yt}});
    expect_near_all(out.at("dx"), want, "softmax_grad " + std::string(dtype_name(t)));
  }
}

TEST(WidenedRowGrads, LayerNormGradReads16BitDyAndIsTheFormulas) {
  const std::vector<double> x = dyadic(kRows * kCols, 2), dy = dyadic(kRows * kCols, 9);
  std::vector<double> scale(kCols);
  for (int64_t j = 0; j < kCols; ++j) scale[j] = 0.5 + 0.125 * static_cast<double>(j);
  const double eps = 1e-5;
  std::vector<double> dx(x.size()), ds(kCols, 0.0), db(kCols, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    const double* xr = &x[r * kCols];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < kCols; ++j) mean += xr[j] / kCols;
    for (int64_t j = 0; j < kCols; ++j) var += (xr[j] - mean) * (xr[j] - mean) / kCols;
    const double inv = 1 / std::sqrt(var + eps);
    std::vector<double> xhat(kCols), g(kCols);
    double mean_g = 0, mean_gx = 0;
    for (int64_t j = 0; j < kCols; ++j) {
      xhat[j] = (xr[j] - mean) * inv;
      g[j] = dy[r * kCols + j] * scale[j];
      mean_g += g[j] / kCols;
      mean_gx += g[j] * xhat[j] / kCols;
      ds[j] += dy[r * kCols + j] * xhat[j];
      db[j] += dy[r * kCols + j];
    }
    for (int64_t j = 0; j < kCols; ++j)
      dx[r * kCols + j] = (g[j] - mean_g - xhat[j] * mean_gx) * inv;
  }
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    GradGraph gg("LayerNormalizationGrad", t);
    gg.grad->attributes.push_back(ir::Attribute::make_float("epsilon", static_cast<float>(eps)));
    EXPECT_EQ(read_row_grads_widened(*gg.model), 1);
    EXPECT_EQ(gg.grad->inputs[0], gg.dy);
    EXPECT_FALSE(gg.has_cast());
    auto out = test_util::run_on_cpu(*gg.model,
                                     {{"dy", float_tensor(t, dy, {kRows, kCols})},
                                      {"x", float_tensor(DType::kFloat32, x, {kRows, kCols})},
                                      {"scale", float_tensor(DType::kFloat32, scale, {kCols})}});
    const std::string what = "layer_norm_grad " + std::string(dtype_name(t));
    expect_near_all(out.at("dx"), dx, what + " dX");
    expect_near_all(out.at("dscale"), ds, what + " dScale");
    expect_near_all(out.at("dbias"), db, what + " dBias");
  }
}

TEST(WidenedRowGrads, CastsReadElsewhereKeptOrOfOtherTypesStay) {
  for (const std::string op : {"SoftmaxGrad", "LayerNormalizationGrad"}) {
    {  // the float dY is read by another node too
      GradGraph gg(op, DType::kBFloat16);
      ir::Value* sum = gg.model->graph->add_value("sum", {DType::kFloat32, Shape{}});
      gg.model->graph->add_node("ReduceSum", {gg.cast_out}, {sum}, "sum");
      gg.model->graph->outputs.push_back(sum);
      EXPECT_EQ(read_row_grads_widened(*gg.model), 0) << op;
    }
    {  // ... or kept as a graph output
      GradGraph gg(op, DType::kBFloat16);
      gg.model->graph->outputs.push_back(gg.cast_out);
      EXPECT_EQ(read_row_grads_widened(*gg.model), 0) << op;
    }
    {  // float64 narrowed to float: not a widening
      GradGraph gg(op, DType::kFloat64);
      EXPECT_EQ(read_row_grads_widened(*gg.model), 0) << op;
      EXPECT_TRUE(gg.has_cast()) << op;
    }
    {  // ONNX's domain: not the backward ops
      GradGraph gg(op, DType::kFloat16);
      gg.grad->domain.clear();
      EXPECT_EQ(read_row_grads_widened(*gg.model), 0) << op;
    }
  }
}

// x [8, 6] -> LayerNormalization(gamma, beta) -> MatMul W1 [6, 6] -> Softmax -> MatMul W2 [6, 5]
// -> SoftmaxCrossEntropyLoss. In bf16 autocast runs the LayerNorm and the Softmax in float and
// casts their outputs for the MatMuls, whose gradients come back in bf16: both backwards read
// them widened.
TEST(WidenedRowGrads, Bf16TrainingPlanHasNoCastIntoTheRowGrads) {
  auto model = [] {
    auto m = std::make_unique<ir::Model>();
    m->opsets.push_back({"", 17});
    m->graph->name = "ln_softmax";
    ir::Graph& g = *m->graph;
    auto param = [&](const std::string& name, Shape dims) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      std::vector<float> w(static_cast<size_t>(n));
      for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(int64_t(i * 5 % 13) - 6) / 8;
      return test_util::add_float_param(g, name, std::move(dims), w);
    };
    auto value = [&](const std::string& name, Shape s) {
      return g.add_value(name, {DType::kFloat32, std::move(s)});
    };
    ir::Value* x = test_util::add_input(g, "x", {8, 6}, DType::kFloat32);
    ir::Value* labels = test_util::add_input(g, "labels", {8}, DType::kInt64);
    ir::Value* h = value("h", {8, 6});
    g.add_node("LayerNormalization", {x, param("gamma", {6}), param("beta", {6})}, {h}, "ln");
    ir::Value* s = value("s", {8, 6});
    g.add_node("MatMul", {h, param("W1", {6, 6})}, {s}, "mm1");
    ir::Value* p = value("p", {8, 6});
    g.add_node("Softmax", {s}, {p}, "softmax");
    ir::Value* logits = value("logits", {8, 5});
    g.add_node("MatMul", {p, param("W2", {6, 5})}, {logits}, "mm2");
    ir::Value* loss = value("loss", {});
    g.add_node("SoftmaxCrossEntropyLoss", {logits, labels}, {loss}, "ce");
    g.outputs.push_back(loss);
    return m;
  };
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.1;
  o.autocast.precision = Precision::kBF16;
  for (const std::string target : {"cpu", "cuda:sm_90"}) {
    o.lowering.target = target;
    const plan::Plan p = compiler::compile_model(*model(), o, "ln_softmax");
    std::vector<int> cast_outputs;
    for (const plan::Step& step : p.steps()) {
      if (step.op() == "Cast")
        cast_outputs.insert(cast_outputs.end(), step.outputs().begin(), step.outputs().end());
    }
    int grads = 0;
    for (const plan::Step& step : p.steps()) {
      if (step.domain() != "ampc" ||
          (step.op() != "SoftmaxGrad" && step.op() != "LayerNormalizationGrad"))
        continue;
      ++grads;
      const int dy = step.inputs(0);
      EXPECT_EQ(p.buffers(dy).dtype(), static_cast<int32_t>(DType::kBFloat16))
          << target << " " << step.op();
      EXPECT_EQ(std::count(cast_outputs.begin(), cast_outputs.end(), dy), 0)
          << target << " " << step.op();
    }
    EXPECT_EQ(grads, 2) << target;
    // The report says what they compute in: float32, the outputs' type, not the bf16 they read.
    int reported = 0;
    for (const auto& n : report::plan_precision_report(p, report::PlanOrigin::kPlan).nodes) {
      if (n.op != "ampc.SoftmaxGrad" && n.op != "ampc.LayerNormalizationGrad") continue;
      ++reported;
      EXPECT_EQ(n.compute_dtype, DType::kFloat32) << target << " " << n.op;
      EXPECT_NE(n.rule.find("16-bit dY read widened"), std::string::npos) << n.rule;
    }
    EXPECT_EQ(reported, 2) << target;
  }
}

}  // namespace
}  // namespace ampc::passes
