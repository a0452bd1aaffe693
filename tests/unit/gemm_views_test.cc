// A MatMul's operand and result transposes folded as strided views (lower/gemm_epilogue.h,
// GemmParams.perm_a / perm_b / perm_y) in CPU plans: which transposes fold, that CUDA plans keep
// them as steps, and the results against float64 products written out here, in f32 (oneDNN's
// strided matmul) and f64 (the unfolded operators the CPU backend runs otherwise). The graph
// is attention's shape: heads split from [B, T, H, D] by transposes, K^T, the heads merged.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/cpu/executor.h"

namespace ampc {
namespace {

constexpr int64_t B = 2, T = 4, H = 3, D = 5;

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// A tensor as nested indices: element (i0, i1, ...) of a row-major buffer.
struct View {
  const std::vector<double>* data;
  std::vector<int64_t> shape;
  double at(const std::vector<int64_t>& idx) const {
    const auto st = strides_of(shape);
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * st[i];
    return (*data)[static_cast<size_t>(off)];
  }
};

// Transpose(x, perm) element idx: x at the index with x's axis perm[i] = idx[i].
double transposed(const View& x, const std::vector<int64_t>& perm,
                  const std::vector<int64_t>& idx) {
  std::vector<int64_t> src(idx.size());
  for (size_t i = 0; i < perm.size(); ++i) src[static_cast<size_t>(perm[i])] = idx[i];
  return x.at(src);
}

struct Graph {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  ir::Value* value(const std::string& name, std::vector<int64_t> dims, DType t) {
    return model->graph->add_value(name, {t, std::move(dims)});
  }
  void transpose(ir::Value* in, ir::Value* out, std::vector<int64_t> perm) {
    model->graph->add_node("Transpose", {in}, {out}, "t_" + out->name)
        ->attributes.push_back(ir::Attribute::make_ints("perm", std::move(perm)));
  }
};

// s = q k^T with q = Transpose(x, [0,2,1,3]) and k^T = Transpose(y, [0,2,3,1]);
// out = Transpose(s v, [0,2,1,3]) with v = Transpose(z, [0,2,1,3]);
// cols = Transpose(Transpose(x, [0,2,3,1]) s, [0,3,1,2]) (stored with its columns contiguous);
// far = Transpose(x, [1,3,0,2]) u, whose transpose moves x's innermost axis to the batch.
std::unique_ptr<ir::Model> attention_like(DType t) {
  Graph g;
  g.model->opsets.push_back({"", 17});
  g.model->graph->name = "views";
  ir::Value* x = g.value("x", {B, T, H, D}, t);
  ir::Value* y = g.value("y", {B, T, H, D}, t);
  ir::Value* z = g.value("z", {B, T, H, D}, t);
  ir::Value* u = g.value("u", {H, 2}, t);
  g.model->graph->inputs = {x, y, z, u};
  ir::Value* q = g.value("q", {B, H, T, D}, t);
  ir::Value* kt = g.value("kt", {B, H, D, T}, t);
  ir::Value* s = g.value("s", {B, H, T, T}, t);
  ir::Value* v = g.value("v", {B, H, T, D}, t);
  ir::Value* o = g.value("o", {B, H, T, D}, t);
  ir::Value* out = g.value("out", {B, T, H, D}, t);
  ir::Value* xt = g.value("xt", {B, H, D, T}, t);
  ir::Value* c = g.value("c", {B, H, D, T}, t);
  ir::Value* cols = g.value("cols", {B, T, H, D}, t);
  ir::Value* n = g.value("n", {T, D, B, H}, t);
  ir::Value* far = g.value("far", {T, D, B, 2}, t);
  g.transpose(x, q, {0, 2, 1, 3});
  g.transpose(y, kt, {0, 2, 3, 1});
  g.model->graph->add_node("MatMul", {q, kt}, {s}, "scores");
  g.transpose(z, v, {0, 2, 1, 3});
  g.model->graph->add_node("MatMul", {s, v}, {o}, "mix");
  g.transpose(o, out, {0, 2, 1, 3});
  g.transpose(x, xt, {0, 2, 3, 1});
  g.model->graph->add_node("MatMul", {xt, s}, {c}, "columns");
  g.transpose(c, cols, {0, 3, 1, 2});
  g.transpose(x, n, {1, 3, 0, 2});
  g.model->graph->add_node("MatMul", {n, u}, {far}, "far");
  g.model->graph->outputs = {s, out, cols, far};
  return std::move(g.model);
}

plan::Plan compile(DType t, const std::string& target) {
  auto m = attention_like(t);
  compiler::CompileOptions o;
  o.lowering.target = target;
  return compiler::compile_model(*m, o, "views");
}

std::map<std::string, std::vector<double>> inputs_data() {
  std::map<std::string, std::vector<double>> in;
  double seed = 0.3;
  for (const char* name : {"x", "y", "z", "u"}) {
    const int64_t count = std::string(name) == "u" ? H * 2 : B * T * H * D;
    auto& v = in[name];
    for (int64_t i = 0; i < count; ++i) v.push_back(std::sin(seed * static_cast<double>(i + 1)));
    seed += 0.37;
  }
  return in;
}

// [B, H, m, n] row-major: element (b, h, i, j) = sum over k of a(b, h, i, k) * w(b, h, k, j).
template <typename A, typename W>
std::vector<double> per_head_product(int64_t m, int64_t n, int64_t depth, A a, W w) {
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < depth; ++k) acc += a(b, h, i, k) * w(b, h, k, j);
          out.push_back(acc);
        }
  return out;
}

// The four outputs in float64, written out from the definitions above.
std::map<std::string, std::vector<double>> reference(
    const std::map<std::string, std::vector<double>>& in) {
  const View x{&in.at("x"), {B, T, H, D}}, y{&in.at("y"), {B, T, H, D}},
      z{&in.at("z"), {B, T, H, D}}, u{&in.at("u"), {H, 2}};
  std::map<std::string, std::vector<double>> r;
  r["s"] = per_head_product(
      T, T, D,
      [&](int64_t b, int64_t h, int64_t i, int64_t d) {
        return transposed(x, {0, 2, 1, 3}, {b, h, i, d});
      },
      [&](int64_t b, int64_t h, int64_t d, int64_t j) {
        return transposed(y, {0, 2, 3, 1}, {b, h, d, j});
      });
  const View sv{&r["s"], {B, H, T, T}};
  const auto s_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) { return sv.at({b, h, i, j}); };
  const std::vector<double> o =
      per_head_product(T, D, T, s_at, [&](int64_t b, int64_t h, int64_t j, int64_t d) {
        return transposed(z, {0, 2, 1, 3}, {b, h, j, d});
      });
  const std::vector<double> c = per_head_product(
      D, T, T,
      [&](int64_t b, int64_t h, int64_t d, int64_t i) {
        return transposed(x, {0, 2, 3, 1}, {b, h, d, i});
      },
      s_at);
  const View ov{&o, {B, H, T, D}}, cv{&c, {B, H, D, T}};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          r["out"].push_back(transposed(ov, {0, 2, 1, 3}, {b, t, h, d}));
          r["cols"].push_back(transposed(cv, {0, 3, 1, 2}, {b, t, h, d}));
        }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < 2; ++k) {
          double acc = 0;
          for (int64_t h = 0; h < H; ++h)
            acc += transposed(x, {1, 3, 0, 2}, {t, d, b, h}) * u.at({h, k});
          r["far"].push_back(acc);
        }
  return r;
}

std::vector<int64_t> ints(const google::protobuf::RepeatedField<int64_t>& f) {
  return {f.begin(), f.end()};
}

// The CPU plan: every transpose but the one that moves x's innermost axis to the batch is a
// view of its MatMul; the permutations are the Transposes' own.
TEST(GemmViews, CpuPlansReadAndWriteThroughTransposes) {
  const plan::Plan p = compile(DType::kFloat32, "cpu");
  std::map<std::string, plan::GemmParams> gemms;
  int transposes = 0;
  for (const plan::Step& s : p.steps()) {
    if (s.op() == "Transpose") {
      ++transposes;
      EXPECT_EQ(s.source_nodes(0), "t_n");
    }
    if (s.op() == "MatMul") gemms[s.source_nodes(0)] = s.gemm();
  }
  EXPECT_EQ(transposes, 1);
  ASSERT_EQ(gemms.size(), 4u);
  EXPECT_EQ(ints(gemms["scores"].perm_a()), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(ints(gemms["scores"].perm_b()), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_TRUE(gemms["scores"].perm_y().empty());
  EXPECT_TRUE(gemms["mix"].perm_a().empty());
  EXPECT_EQ(ints(gemms["mix"].perm_b()), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(ints(gemms["mix"].perm_y()), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(ints(gemms["columns"].perm_a()), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(ints(gemms["columns"].perm_y()), (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_TRUE(gemms["far"].perm_a().empty());
}

// cuBLASLt has one batch stride: a CUDA plan keeps every transpose as a step.
TEST(GemmViews, CudaPlansKeepTheTransposes) {
  const plan::Plan p = compile(DType::kFloat32, "cuda:sm_90");
  int transposes = 0;
  for (const plan::Step& s : p.steps()) {
    transposes += s.op() == "Transpose";
    if (s.has_gemm()) {
      EXPECT_TRUE(s.gemm().perm_a().empty() && s.gemm().perm_b().empty() &&
                  s.gemm().perm_y().empty())
          << s.source_nodes(0);
    }
  }
  EXPECT_EQ(transposes, 7);
}

// Autodiff's chain: q = Transpose(x, [0,2,1,3]) read by one MatMul, and q^T (a swap of q's
// last two axes) by another. A CUDA plan keeps q as a step and reads q^T as trans_a (the
// chain is not composed there: composed, q^T would be a copy of its own); a CPU plan composes
// the chain and reads both as views of x.
TEST(GemmViews, TransposeChainsComposeInCpuPlansOnly) {
  for (const char* target : {"cpu", "cuda:sm_90"}) {
    SCOPED_TRACE(target);
    Graph g;
    g.model->opsets.push_back({"", 17});
    g.model->graph->name = "chain";
    const DType t = DType::kFloat32;
    ir::Value* x = g.value("x", {B, T, H, D}, t);
    ir::Value* w = g.value("w", {B, H, D, T}, t);
    ir::Value* u = g.value("u", {B, H, T, D}, t);
    g.model->graph->inputs = {x, w, u};
    ir::Value* q = g.value("q", {B, H, T, D}, t);
    ir::Value* qt = g.value("qt", {B, H, D, T}, t);
    ir::Value* s = g.value("s", {B, H, T, T}, t);
    ir::Value* r = g.value("r", {B, H, D, D}, t);
    g.transpose(x, q, {0, 2, 1, 3});
    g.transpose(q, qt, {0, 1, 3, 2});
    g.model->graph->add_node("MatMul", {q, w}, {s}, "forward");
    g.model->graph->add_node("MatMul", {qt, u}, {r}, "backward");
    g.model->graph->outputs = {s, r};
    compiler::CompileOptions o;
    o.lowering.target = target;
    const plan::Plan p = compiler::compile_model(*g.model, o, "chain");
    int transposes = 0;
    std::map<std::string, plan::GemmParams> gemms;
    for (const plan::Step& st : p.steps()) {
      transposes += st.op() == "Transpose";
      if (st.op() == "MatMul") gemms[st.source_nodes(0)] = st.gemm();
    }
    if (std::string(target) == "cpu") {
      EXPECT_EQ(transposes, 0);
      EXPECT_EQ(ints(gemms["backward"].perm_a()), (std::vector<int64_t>{0, 2, 3, 1}));
    } else {
      EXPECT_EQ(transposes, 1);
      EXPECT_TRUE(gemms["backward"].trans_a());
    }
  }
}

// f32: oneDNN reads and writes the views; f64: the CPU backend runs the folded Transposes
// around its MatMul; the CUDA plan's explicit transposes on the CPU. All against float64.
TEST(GemmViews, ResultsEqualTheProductsOfTheTransposedTensors) {
  const auto in = inputs_data();
  const auto want = reference(in);
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    for (const char* target : {"cpu", "cuda:sm_90"}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " " + target);
      rt::cpu::Executor exec(compile(t, target));
      std::map<std::string, rt::Tensor> feeds;
      for (const auto& [name, values] : in) {
        const std::vector<int64_t> shape =
            name == "u" ? std::vector<int64_t>{H, 2} : std::vector<int64_t>{B, T, H, D};
        rt::Tensor x(t, shape);
        for (size_t i = 0; i < values.size(); ++i) {
          if (t == DType::kFloat32) {
            x.data<float>()[i] = static_cast<float>(values[i]);
          } else {
            x.data<double>()[i] = values[i];
          }
        }
        feeds.emplace(name, std::move(x));
      }
      const auto out = exec.run(feeds);
      const double tol = t == DType::kFloat32 ? 2e-6 : 1e-13;
      for (const auto& [name, values] : want) {
        const rt::Tensor& got = out.at(name);
        ASSERT_EQ(got.numel(), static_cast<int64_t>(values.size())) << name;
        size_t wrong = 0, first = values.size();
        for (size_t i = 0; i < values.size(); ++i) {
          const double g = t == DType::kFloat32 ? got.data<float>()[i] : got.data<double>()[i];
          if (!(std::abs(g - values[i]) <= tol * (1 + std::abs(values[i])))) {
            if (!wrong++) first = i;
          }
        }
        EXPECT_EQ(wrong, 0u) << name << ", first at " << first;
      }
    }
  }
}

}  // namespace
}  // namespace ampc
