// The CPU executor runs the plan's static memory plan (runtime/cpu/executor.h): every arena
// buffer a step writes lies at its planned offset in one arena, so CPU training depends on
// the plan being right, as the GPU run does. A plan whose offsets make two live buffers
// overlap trains wrongly; the intact plan trains as a plan without placement does.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "driver/pipeline.h"
#include "kernels/cpu/dnnl_context.h"
#include "passes/autocast.h"
#include "runtime/cpu/executor.h"
#include "runtime/plan/plan_stats.h"
#include "tests/support/layout_ops_model.h"
#include "tests/support/onnx_builder.h"
#include "tests/support/temp_dir.h"

namespace ampc::rt::cpu {
namespace {

plan::Plan mlp_training_plan() {
  compiler::CompileOptions o;
  o.train = true;
  o.lowering.target = "cpu";
  return compiler::compile_file(std::string(AMPC_SOURCE_DIR) + "/models/mlp.onnx", o);
}

std::map<std::string, Tensor> batch(int step) {
  Tensor x(DType::kFloat32, {32, 64});
  Tensor y(DType::kInt64, {32});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 7 + step) % 17) / 17.f;
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = (i + step) % 10;
  return {{"x", x}, {"y", y}};
}

// Losses of `steps` training steps and the state after them.
struct Trained {
  std::vector<float> losses;
  std::map<std::string, Tensor> state;
};

Trained train(const plan::Plan& p, int steps) {
  Executor ex(p);
  Trained t;
  for (int s = 0; s < steps; ++s) t.losses.push_back(ex.run(batch(s)).at("loss").data<float>()[0]);
  t.state = ex.state();
  return t;
}

// The largest relative difference between two states, tensor by tensor (norm-wise).
double state_difference(const std::map<std::string, Tensor>& a,
                        const std::map<std::string, Tensor>& b) {
  double worst = 0;
  for (const auto& [name, ta] : a) {
    const Tensor& tb = b.at(name);
    if (ta.dtype() != DType::kFloat32) continue;
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const double x = ta.data<float>()[i], y = tb.data<float>()[i];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    if (norm > 0) worst = std::max(worst, std::sqrt(diff / norm));
    if (std::isnan(diff)) return INFINITY;
  }
  return worst;
}

TEST(ArenaExecution, EveryPlacedOutputLiesAtItsPlannedOffset) {
  const plan::Plan p = mlp_training_plan();
  ASSERT_GT(p.memory().arena_bytes(), 0);
  Executor ex(p);
  const uint8_t* base = nullptr;
  int checked = 0;
  ex.set_step_observer(
      [&](int step, const std::vector<const Tensor*>&, const std::vector<const Tensor*>& outputs) {
        const auto& s = p.steps(step);
        for (int k = 0; k < s.outputs_size(); ++k) {
          const auto& b = p.buffers(s.outputs(k));
          if (b.region() != plan::REGION_ARENA || !outputs[k] || outputs[k]->nbytes() == 0)
            continue;
          const auto* at = static_cast<const uint8_t*>(outputs[k]->raw());
          if (!base) base = at - b.offset();
          EXPECT_EQ(at - base, b.offset()) << b.name();
          ++checked;
        }
      });
  ex.run(batch(0));
  EXPECT_GT(checked, 10);
}

TEST(ArenaExecution, IntactPlanTrainsAsWithoutPlacement) {
  const plan::Plan p = mlp_training_plan();
  plan::Plan unplaced = p;
  unplaced.mutable_memory()->set_arena_bytes(0);  // no arena: storage per value
  const Trained a = train(p, 4), b = train(unplaced, 4);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(state_difference(a.state, b.state), 0.0);
}

TEST(ArenaExecution, OverlappingLiveBuffersBreakTraining) {
  const plan::Plan p = mlp_training_plan();
  // Lifetimes: the first step writing each buffer and the last step reading it.
  const int n = p.buffers_size();
  std::vector<int> first(n, INT_MAX), last(n, -1);
  for (int s = 0; s < p.steps_size(); ++s) {
    for (int id : p.steps(s).outputs())
      if (id >= 0) first[id] = std::min(first[id], s);
    for (int id : p.steps(s).inputs())
      if (id >= 0) last[id] = std::max(last[id], s);
  }
  std::vector<bool> shared(n, false);  // storage shared with a view or an in-place write
  for (const auto& b : p.buffers()) {
    if (b.alias_of() > 0) shared[b.id()] = shared[b.alias_of() - 1] = true;
  }
  auto plain = [&](const plan::Buffer& b) {
    return b.region() == plan::REGION_ARENA && b.role() == plan::ACTIVATION && !shared[b.id()] &&
           first[b.id()] < last[b.id()];
  };
  // A: the fp32 activation live the longest (saved by the forward for the backward).
  int a = -1;
  for (const auto& b : p.buffers()) {
    if (plain(b) && b.dtype() == static_cast<int32_t>(DType::kFloat32) &&
        (a < 0 || last[b.id()] - first[b.id()] > last[a] - first[a]))
      a = b.id();
  }
  ASSERT_GE(a, 0);
  // B: the largest other arena buffer written while A is live that fits A's place.
  int victim = -1;
  for (const auto& b : p.buffers()) {
    if (b.region() != plan::REGION_ARENA || b.id() == a || b.alias_of() == a + 1 ||
        first[b.id()] <= first[a] || first[b.id()] >= last[a] ||
        plan::buffer_bytes(b) > plan::buffer_bytes(p.buffers(a)))
      continue;
    if (victim < 0 || plan::buffer_bytes(b) > plan::buffer_bytes(p.buffers(victim)))
      victim = b.id();
  }
  ASSERT_GE(victim, 0);
  plan::Plan broken = p;
  broken.mutable_buffers(victim)->set_offset(p.buffers(a).offset());
  SCOPED_TRACE("'" + p.buffers(victim).name() + "' moved onto '" + p.buffers(a).name() + "'");

  const Trained intact = train(p, 4), corrupted = train(broken, 4);
  EXPECT_GT(state_difference(corrupted.state, intact.state), 1e-3);
}

// oneDNN's primitives (GEMMs and convolutions) are created when the plan is loaded: a
// training step creates none.
// Ops that copy their data input and then change elements of the copy (ScatterND,
// ScatterElements, Trilu, ReverseSequence) must not change the input: here it is an
// activation in the arena that later steps read again. A plain copy of such a tensor shares
// its storage, which is how these ops once wrote into their input.
TEST(ArenaExecution, CopyingOpsLeaveTheirArenaInputAsItWas) {
  namespace ob = test::onnx_build;
  onnx::ModelProto m = ob::model("copies");
  auto* g = m.mutable_graph();
  ob::add_float_io(g, "x", {2, 3});
  ob::add_float_io(g, "u", {1, 3});
  ob::add_float_io(g, "e", {2, 3});
  ob::add_node(g, "Relu", {"x"}, "r");
  ob::add_int64_initializer(g, "row", {1});
  ob::add_node(g, "Reshape", {"row", "shape11"}, "rows");
  ob::add_int64_initializer(g, "shape11", {1, 1});
  ob::add_node(g, "ScatterND", {"r", "rows", "u"}, "nd");
  ob::add_int64_initializer(g, "cols", {2, 0, 1, 1, 0, 2});
  ob::add_int64_initializer(g, "shape23", {2, 3});
  ob::add_node(g, "Reshape", {"cols", "shape23"}, "at");
  ob::add_int(ob::add_node(g, "ScatterElements", {"r", "at", "e"}, "el"), "axis", 1);
  ob::add_int(ob::add_node(g, "Trilu", {"r"}, "lower"), "upper", 0);
  ob::add_int64_initializer(g, "lens", {2, 1, 2});
  auto* reverse = ob::add_node(g, "ReverseSequence", {"r", "lens"}, "rev");
  ob::add_int(reverse, "time_axis", 0);
  ob::add_int(reverse, "batch_axis", 1);
  ob::add_node(g, "Sum", {"nd", "el", "lower", "rev", "r"}, "y");
  ob::add_float_io(g, "y", {2, 3}, /*output=*/true);
  test::TempDir dir;
  ob::write_model(m, dir / "m.onnx");
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  Executor exec(compiler::compile_file(dir / "m.onnx", o));
  Tensor x(DType::kFloat32, {2, 3}), u(DType::kFloat32, {1, 3}), e(DType::kFloat32, {2, 3});
  const float xs[] = {1, -2, 3, 4, 5, -6}, us[] = {10, 20, 30}, es[] = {7, 8, 9, 11, 12, 13};
  std::memcpy(x.data<float>(), xs, sizeof xs);
  std::memcpy(u.data<float>(), us, sizeof us);
  std::memcpy(e.data<float>(), es, sizeof es);
  const Tensor y = exec.run({{"x", x}, {"u", u}, {"e", e}}).at("y");
  // Worked by hand: r = [[1, 0, 3], [4, 5, 0]].
  const float nd[] = {1, 0, 3, 10, 20, 30};  // row 1 replaced by u
  const float el[] = {8, 9, 7, 12, 11, 13};  // r[i][at[i][j]] = e[i][j]: every element
  const float lower[] = {1, 0, 0, 4, 5, 0};  // r below and on the diagonal
  const float rev[] = {4, 0, 0, 1, 5, 3};    // columns (the batch) reversed over 2, 1, 2 steps
  const float r[] = {1, 0, 3, 4, 5, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y.data<float>()[i], nd[i] + el[i] + lower[i] + rev[i] + r[i]) << i;
}

// Loads p (counting the problems oneDNN's cache holds before and after) and runs one step on
// zeros: the step must make no new primitive.
void expect_primitives_made_at_load(const plan::Plan& p) {
  const size_t before = kernels::cpu::dnnl_support::cached_problems();
  Executor ex(p);
  const size_t loaded = kernels::cpu::dnnl_support::cached_problems();
  EXPECT_GT(loaded, before);
  std::map<std::string, Tensor> inputs;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    inputs[binding.name()] =
        Tensor(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
  }
  ex.run(inputs);
  EXPECT_EQ(kernels::cpu::dnnl_support::cached_problems(), loaded);
}

// In fp32 and bf16 plans (whose convolutions are ampc.Conv and ampc.ConvTranspose, the bf16
// forms of ONNX's), the transposed convolution's forward (a backward-data pass) among them.
TEST(LibraryPrimitives, AreCreatedWhenThePlanIsLoaded) {
  test::TempDir dir;
  const std::string layout_ops = dir / "layout_ops.onnx";
  test::write_layout_ops_model(layout_ops);
  for (const auto& [model, precision] : std::vector<std::pair<std::string, passes::Precision>>{
           {"mlp", passes::Precision::kFP32},
           {"cnn", passes::Precision::kFP32},
           {"layout_ops", passes::Precision::kFP32},
           {"mlp", passes::Precision::kBF16},
           {"cnn", passes::Precision::kBF16},
           {"layout_ops", passes::Precision::kBF16}}) {
    SCOPED_TRACE(model + " " + std::string(passes::precision_name(precision)));
    compiler::CompileOptions o;
    o.train = true;
    o.lowering.target = "cpu";
    o.autocast.precision = precision;
    // A batch of 3, which no other test of this process uses: its problems are new (the
    // layout model's shapes are its own).
    if (model == "mlp") o.import.input_shapes = {{"x", {3, 64}}, {"y", {3}}};
    if (model == "cnn") o.import.input_shapes = {{"x", {3, 1, 8, 8}}, {"y", {3}}};
    const std::string path = model == "layout_ops"
                                 ? layout_ops
                                 : std::string(AMPC_SOURCE_DIR) + "/models/" + model + ".onnx";
    expect_primitives_made_at_load(compiler::compile_file(path, o));
  }
}

}  // namespace
}  // namespace ampc::rt::cpu
