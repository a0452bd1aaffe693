// Elementwise fusion (lower/fusion.h) and its lowering (lower/) on small hand-built
// graphs: a chain becomes one kernel, MatMul stays a step of its own, siblings share a
// kernel, a merge that would make a cycle is refused, broadcast operands get strides,
// independent groups of one structure become a multi-tensor step, and the skip-step guard
// computes an optimizer update in place into its state (run on the CPU backend against the
// unfused plan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/half.h"
#include "driver/pipeline.h"
#include "ir/verifier.h"
#include "kernels/codegen/codegen.h"
#include "lower/fusion.h"
#include "lower/kernel_builder.h"
#include "lower/lowering.h"
#include "lower/plan_emit.h"
#include "passes/recompute_casts.h"
#include "passes/recompute_elementwise.h"
#include "runtime/cpu/executor.h"

namespace ampc {
namespace {

using lower::FusionStep;
using Shape = std::vector<int64_t>;

constexpr DType kF32 = DType::kFloat32;

class Builder {
 public:
  Builder() { model.opsets = {{"", 17}}; }

  ir::Value* input(const std::string& name, Shape shape, DType t = kF32) {
    ir::Value* v = model.graph->add_value(name, {t, std::move(shape)});
    v->is_graph_input = true;
    model.graph->inputs.push_back(v);
    return v;
  }
  // A one-element (or filled) initializer.
  ir::Value* constant(const std::string& name, float value, Shape shape = {}) {
    ir::Value* v = model.graph->add_value(name, {kF32, shape});
    auto t = std::make_unique<ir::Tensor>();
    t->name = name;
    t->dtype = kF32;
    t->dims = shape;
    const int64_t n = ir::shape_numel(shape);
    t->bytes.resize(static_cast<size_t>(n) * sizeof(float));
    for (int64_t i = 0; i < n; ++i) std::memcpy(t->bytes.data() + i * sizeof(float), &value, 4);
    v->initializer = std::move(t);
    model.graph->initializers.push_back(v);
    return v;
  }
  ir::Value* op(const std::string& type, std::vector<ir::Value*> in, Shape shape, DType t = kF32) {
    ir::Value* out = model.graph->add_value(type + std::to_string(++count_), {t, std::move(shape)});
    model.graph->add_node(type, std::move(in), {out}, type + "_" + std::to_string(count_));
    return out;
  }
  void output(ir::Value* v) { model.graph->outputs.push_back(v); }

  std::vector<FusionStep> fuse() {
    ir::verify(model);
    const lower::KernelBuilder kb(model);
    lower::FusionOptions o;
    o.structure_key = [&](const lower::FusionGroup& g) {
      return kernels::codegen::structure_key(kb.build(g).def);
    };
    return lower::fuse_elementwise(model, o);
  }
  lower::LoweredKernel kernel(const lower::FusionGroup& g) {
    return lower::KernelBuilder(model).build(g);
  }

  ir::Model model;

 private:
  int count_ = 0;
};

std::vector<std::string> ops_of(const FusionStep& s) {
  std::vector<std::string> ops;
  if (!s.fused()) return {s.node->op_type};
  for (const auto& g : s.segments) {
    for (const ir::Node* n : g.nodes) ops.push_back(n->op_type);
  }
  return ops;
}

std::vector<std::string> instrs(const kernels::KernelDef& k) {
  std::vector<std::string> ops;
  for (const auto& in : k.body()) ops.push_back(in.op());
  return ops;
}

using Strings = std::vector<std::string>;

// The model's plan with its elementwise nodes fused for `target` (a CUDA target makes every
// fusible node a kernel; the CPU backend runs the plan with its host JIT).
plan::Plan fused_plan(const ir::Model& model, const std::string& target) {
  const lower::Lowering lowered = lower::lower_graph(model, {.fuse = true, .target = target});
  lower::EmitOptions emit;
  emit.lowering = &lowered;
  return lower::emit_plan(model, emit);
}

// Element i of a tensor of any float type set to v, rounded once.
void set_float(rt::Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::kFloat32) t.data<float>()[i] = v;
  if (t.dtype() == DType::kFloat64) t.data<double>()[i] = v;
  if (t.dtype() == DType::kFloat16) t.data<Half>()[i] = float_to_half(v);
  if (t.dtype() == DType::kBFloat16) t.data<BFloat16>()[i] = float_to_bf16(v);
}

// The fused plan against the unfused one (the CPU ops) on `inputs`: each of its `outputs`
// outputs the same bits.
void expect_fused_bits(const plan::Plan& fused_plan, const ir::Model& model,
                       const std::map<std::string, rt::Tensor>& inputs, size_t outputs,
                       const std::string& what) {
  rt::cpu::Executor fused(fused_plan);
  rt::cpu::Executor unfused(lower::emit_plan(model, {}));
  const auto got = fused.run(inputs);
  const auto want = unfused.run(inputs);
  ASSERT_EQ(got.size(), outputs) << what;
  ASSERT_EQ(want.size(), outputs) << what;
  for (const auto& [name, w] : want) {
    const rt::Tensor& g = got.at(name);
    EXPECT_EQ(std::memcmp(g.raw(), w.raw(), w.nbytes()), 0) << name << " " << what;
  }
}

// Every node once, each after the producers of its inputs.
void expect_valid_schedule(const ir::Model& m, const std::vector<FusionStep>& steps) {
  std::set<const ir::Node*> done;
  size_t count = 0;
  for (const auto& s : steps) {
    std::vector<const ir::Node*> nodes;
    if (!s.fused()) nodes.push_back(s.node);
    for (const auto& g : s.segments) nodes.insert(nodes.end(), g.nodes.begin(), g.nodes.end());
    for (const ir::Node* n : nodes) {
      for (const ir::Value* v : n->inputs) {
        if (v && v->producer) {
          EXPECT_TRUE(done.count(v->producer)) << n->label() << " too early";
        }
      }
      EXPECT_TRUE(done.insert(n).second) << n->label() << " twice";
      ++count;
    }
  }
  EXPECT_EQ(count, m.graph->nodes.size());
}

TEST(Fusion, ChainBecomesOneKernelWithConstants) {
  Builder b;
  ir::Value* x = b.input("x", {4, 8});
  ir::Value* y = b.input("y", {4, 8});
  ir::Value* out = b.op(
      "Relu", {b.op("Add", {b.op("Mul", {x, b.constant("two", 2)}, {4, 8}), y}, {4, 8})}, {4, 8});
  b.output(out);
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_TRUE(steps[0].fused());
  ASSERT_EQ(steps[0].segments.size(), 1u);
  const auto& g = steps[0].segments[0];
  EXPECT_EQ(ops_of(steps[0]), (Strings{"Mul", "Add", "Relu"}));
  EXPECT_TRUE(g.flat);
  EXPECT_EQ(g.outputs, (std::vector<const ir::Value*>{out}));
  const auto k = b.kernel(g);
  // The scalar initializer is a constant of the kernel, not an operand.
  EXPECT_EQ(k.inputs, (std::vector<const ir::Value*>{x, y}));
  EXPECT_EQ(instrs(k.def), (Strings{"load", "const", "mul", "load", "add", "relu"}));
  EXPECT_EQ(k.def.body(1).value(), 2.0);
  EXPECT_TRUE(k.def.flat());
  EXPECT_EQ(k.def.shape_size(), 0) << "a flat kernel is shape-generic";
  EXPECT_EQ(k.def.outputs_size(), 1);
  EXPECT_EQ(k.def.outputs(0), 5);
}

TEST(Fusion, NoFusionAcrossMatMul) {
  Builder b;
  ir::Value* x = b.input("x", {4, 4});
  ir::Value* w = b.input("w", {4, 4});
  ir::Value* a = b.op("Relu", {b.op("Mul", {x, x}, {4, 4})}, {4, 4});
  ir::Value* m = b.op("MatMul", {a, w}, {4, 4});
  b.output(b.op("Sigmoid", {b.op("Neg", {m}, {4, 4})}, {4, 4}));
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(ops_of(steps[0]), (Strings{"Mul", "Relu"}));
  EXPECT_FALSE(steps[1].fused());
  EXPECT_EQ(ops_of(steps[1]), (Strings{"MatMul"}));
  EXPECT_EQ(ops_of(steps[2]), (Strings{"Neg", "Sigmoid"}));
}

TEST(Fusion, SiblingsReadingOneValueShareAKernel) {
  Builder b;
  ir::Value* x = b.input("x", {16});
  ir::Value* e = b.op("Exp", {x}, {16});
  ir::Value* n = b.op("Neg", {x}, {16});
  b.output(e);
  b.output(n);
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_TRUE(steps[0].fused());
  const auto k = b.kernel(steps[0].segments[0]);
  EXPECT_EQ(k.inputs, (std::vector<const ir::Value*>{x})) << "x is read once";
  EXPECT_EQ(k.outputs, (std::vector<const ir::Value*>{e, n}));
}

TEST(Fusion, MergeThatWouldMakeACycleIsRefused) {
  // Exp -> MatMul -> Add, and Exp -> Add: Exp and Add in one kernel would both feed and
  // wait for the MatMul.
  Builder b;
  ir::Value* x = b.input("x", {4, 4});
  ir::Value* w = b.input("w", {4, 4});
  ir::Value* a = b.op("Exp", {x}, {4, 4});
  ir::Value* m = b.op("MatMul", {a, w}, {4, 4});
  b.output(b.op("Add", {a, m}, {4, 4}));
  const auto steps = b.fuse();
  expect_valid_schedule(b.model, steps);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(ops_of(steps[0]), (Strings{"Exp"}));
  EXPECT_EQ(ops_of(steps[1]), (Strings{"MatMul"}));
  EXPECT_EQ(ops_of(steps[2]), (Strings{"Add"}));
}

TEST(Fusion, GroupsDoNotFormACycleThroughAnotherGroup) {
  // The loss (scalar Muls reading `tiny`) and the gradient seed are siblings; the forward
  // Sub/Mul and the backward Muls/Add are siblings on `diff`. Both merges are fine alone,
  // together they make a cycle: forward -> ReduceMean -> scalars -> Expand -> backward.
  Builder b;
  ir::Value* y = b.input("y", {8, 4});
  ir::Value* t = b.input("t", {8, 4});
  ir::Value* tiny = b.constant("tiny", 1e-7f);
  ir::Value* one = b.constant("one", 1.0f);
  ir::Value* diff = b.op("Sub", {y, t}, {8, 4});
  ir::Value* sq = b.op("Mul", {diff, diff}, {8, 4});
  ir::Value* mse = b.op("ReduceMean", {sq}, {});
  b.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_int("keepdims", 0));
  ir::Value* loss = b.op("Mul", {mse, tiny}, {});
  ir::Value* seed = b.op("Mul", {one, tiny}, {});
  ir::Value* dims = b.model.graph->add_value("dims", {DType::kInt64, Shape{2}});
  auto dims_data = std::make_unique<ir::Tensor>();
  dims_data->dtype = DType::kInt64;
  dims_data->dims = {2};
  const int64_t d[2] = {8, 4};
  dims_data->bytes.resize(sizeof d);
  std::memcpy(dims_data->bytes.data(), d, sizeof d);
  dims->initializer = std::move(dims_data);
  b.model.graph->initializers.push_back(dims);
  ir::Value* e = b.op("Expand", {seed, dims}, {8, 4});
  ir::Value* g =
      b.op("Add", {b.op("Mul", {e, diff}, {8, 4}), b.op("Mul", {e, diff}, {8, 4})}, {8, 4});
  b.output(loss);
  b.output(g);
  const auto steps = b.fuse();
  expect_valid_schedule(b.model, steps);
}

TEST(Fusion, BroadcastOperandsGetStrides) {
  Builder b;
  ir::Value* x = b.input("x", {4, 8});
  ir::Value* row = b.input("row", {8});
  ir::Value* col = b.input("col", {4, 1});
  ir::Value* s = b.input("s", {1});
  b.output(b.op("Mul", {b.op("Add", {b.op("Sub", {x, row}, {4, 8}), col}, {4, 8}), s}, {4, 8}));
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 1u);
  const auto& g = steps[0].segments[0];
  EXPECT_FALSE(g.flat);
  const auto k = b.kernel(g);
  EXPECT_FALSE(k.def.flat());
  EXPECT_EQ(Shape(k.def.shape().begin(), k.def.shape().end()), (Shape{4, 8}));
  ASSERT_EQ(k.inputs, (std::vector<const ir::Value*>{x, row, col, s}));
  auto strides = [&](int j) {
    return Shape(k.def.inputs(j).strides().begin(), k.def.inputs(j).strides().end());
  };
  EXPECT_EQ(strides(0), Shape{}) << "full";
  EXPECT_EQ(strides(1), (Shape{0, 1}));
  EXPECT_EQ(strides(2), (Shape{1, 0}));
  EXPECT_TRUE(k.def.inputs(3).scalar());
  EXPECT_EQ(strides(3), Shape{});
}

// Neighbouring dimensions that every broadcast operand walks linearly merge, and size-1
// dimensions go: a per-channel operand of NCHW gives rows of H * W; an operand that
// broadcasts along H but not W keeps H and W apart.
TEST(Fusion, IterationSpaceCollapsesWhereBroadcastsAllowIt) {
  auto kernel_of = [](const Shape& x_shape, const std::vector<Shape>& operands) {
    Builder b;
    ir::Value* acc = b.input("x", x_shape);
    for (size_t j = 0; j < operands.size(); ++j) {
      acc = b.op("Add", {acc, b.input("b" + std::to_string(j), operands[j])}, x_shape);
    }
    b.output(b.op("Relu", {acc}, x_shape));  // a second node: a lone node is not fused
    const auto steps = b.fuse();
    if (steps.size() != 1 || !steps[0].fused()) {
      ADD_FAILURE() << "not one fused step";
      return kernels::KernelDef();
    }
    return b.kernel(steps[0].segments[0]).def;
  };
  auto shape = [](const kernels::KernelDef& d) {
    return Shape(d.shape().begin(), d.shape().end());
  };
  auto strides = [](const kernels::KernelDef& d, int j) {
    return Shape(d.inputs(j).strides().begin(), d.inputs(j).strides().end());
  };
  const auto channel = kernel_of({2, 3, 4, 5}, {{1, 3, 1, 1}});
  EXPECT_EQ(shape(channel), (Shape{2, 3, 20}));
  EXPECT_EQ(strides(channel, 1), (Shape{0, 1, 0}));
  const auto mixed = kernel_of({2, 3, 4, 5}, {{1, 3, 1, 1}, {5}});
  EXPECT_EQ(shape(mixed), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(strides(mixed, 1), (Shape{0, 1, 0, 0}));
  EXPECT_EQ(strides(mixed, 2), (Shape{0, 0, 0, 1}));
  const auto ones = kernel_of({2, 1, 6}, {{2, 1, 1}});
  EXPECT_EQ(shape(ones), (Shape{2, 6}));
  EXPECT_EQ(strides(ones, 1), (Shape{1, 0}));
  const auto rows = kernel_of({4, 2, 3}, {{2, 3}});  // [2, 3] repeats along the first dim
  EXPECT_EQ(shape(rows), (Shape{4, 6}));
  EXPECT_EQ(strides(rows, 1), (Shape{0, 1}));
}

TEST(Fusion, IndependentGroupsOfOneStructureFormAMultiTensorStep) {
  Builder b;
  ir::Value* lr = b.input("lr", {});
  std::vector<ir::Value*> outs;
  for (int64_t n : {4, 7, 5}) {
    ir::Value* p = b.input("p" + std::to_string(n), {n});
    ir::Value* g = b.input("g" + std::to_string(n), {n});
    ir::Value* half = b.constant("half" + std::to_string(n), 0.5f);
    outs.push_back(b.op("Sub", {p, b.op("Mul", {b.op("Mul", {g, half}, {n}), lr}, {n})}, {n}));
    b.output(outs.back());
  }
  // Another structure, not merged with them.
  ir::Value* q = b.input("q", {3});
  b.output(b.op("Exp", {b.op("Neg", {q}, {3})}, {3}));
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 2u);
  const FusionStep& multi = steps[0].segments.size() == 3 ? steps[0] : steps[1];
  ASSERT_EQ(multi.segments.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(multi.segments[k].outputs[0], outs[k]);

  // Lowered: one kernel defined once; the plan step carries every segment's operands, with
  // the learning rate in each.
  const lower::Lowering lowered = lower::lower_graph(b.model, {.fuse = true, .target = "cpu"});
  ASSERT_EQ(lowered.kernels.size(), 2u);
  lower::EmitOptions emit;
  emit.lowering = &lowered;
  const plan::Plan p = lower::emit_plan(b.model, emit);
  int found = 0;
  for (const auto& s : p.steps()) {
    if (s.segments() != 3) continue;
    ++found;
    EXPECT_EQ(s.op(), "FusedElementwise");
    EXPECT_EQ(s.domain(), "ampc.kernel");
    EXPECT_EQ(s.inputs_size(), 9);
    EXPECT_EQ(s.outputs_size(), 3);
    EXPECT_EQ(s.source_nodes_size(), 9);
    for (int seg = 0; seg < 3; ++seg) {
      int lr_reads = 0;
      for (int j = 0; j < 3; ++j) lr_reads += p.buffers(s.inputs(3 * seg + j)).name() == "lr";
      EXPECT_EQ(lr_reads, 1) << "segment " << seg;
    }
  }
  EXPECT_EQ(found, 1);
  // Values inside a kernel have no buffer.
  for (const auto& buf : p.buffers()) EXPECT_EQ(buf.name().rfind("Mul", 0), std::string::npos);

  // The multi-tensor step computes what the unfused plan does.
  rt::cpu::Executor fused(p);
  rt::cpu::Executor unfused(lower::emit_plan(b.model, {}));
  std::map<std::string, rt::Tensor> feeds;
  for (const ir::Value* v : b.model.graph->inputs) {
    rt::Tensor t(kF32, *v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.37f * static_cast<float>(i + 1);
    feeds[v->name] = t;
  }
  const auto want = unfused.run(feeds);
  const auto got = fused.run(feeds);
  for (const auto& [name, t] : want) {
    ASSERT_EQ(got.at(name).nbytes(), t.nbytes());
    EXPECT_EQ(std::memcmp(got.at(name).raw(), t.raw(), t.nbytes()), 0) << name;
  }
}

// An SGD-like update predicated on a skip flag: state <- Where(skip, state, state - lr * g).
TEST(Fusion, GuardWritesTheUpdateInPlaceUnlessSkipped) {
  Builder b;
  ir::Value* skip = b.input("skip", {}, DType::kBool);
  ir::Value* grad = b.input("grad", {6});
  ir::Value* state = b.constant("w", 1.5f, {6});
  ir::Value* lr = b.constant("lr", 0.25f);
  ir::Value* updated = b.op("Sub", {state, b.op("Mul", {grad, lr}, {6})}, {6});
  ir::Value* source = b.op("Where", {skip, state, updated}, {6});
  b.model.state_updates.push_back({state, source});
  ir::Value* loss = b.op("Neg", {b.op("Exp", {grad}, {6})}, {6});
  b.output(loss);
  const auto steps = b.fuse();
  const lower::FusionGroup* guarded = nullptr;
  for (const auto& s : steps) {
    if (s.fused() && s.segments[0].guard) guarded = &s.segments[0];
  }
  ASSERT_NE(guarded, nullptr);
  EXPECT_EQ(guarded->guard, skip);
  EXPECT_EQ(guarded->guarded_states, (std::vector<const ir::Value*>{state}));
  const auto k = b.kernel(*guarded);
  EXPECT_EQ(k.def.guard(), 1 + static_cast<int>(std::find(k.inputs.begin(), k.inputs.end(), skip) -
                                                k.inputs.begin()));
  EXPECT_EQ(instrs(k.def), (Strings{"load", "const", "mul", "load", "sub"}))
      << "the Where becomes the guard";

  const lower::Lowering lowered = lower::lower_graph(b.model, {.fuse = true, .target = "cpu"});
  lower::EmitOptions emit;
  emit.lowering = &lowered;
  const plan::Plan fused_plan = lower::emit_plan(b.model, emit);
  int aliased = 0;
  for (const auto& buf : fused_plan.buffers()) {
    if (!buf.alias_of()) continue;
    ++aliased;
    EXPECT_EQ(fused_plan.buffers(buf.alias_of() - 1).name(), "w");
  }
  EXPECT_EQ(aliased, 1);

  rt::cpu::Executor fused(fused_plan);
  rt::cpu::Executor unfused(lower::emit_plan(b.model, {}));
  rt::Tensor g(kF32, {6});
  for (int i = 0; i < 6; ++i) g.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  for (bool s : {false, true, false}) {
    rt::Tensor flag(DType::kBool, {});
    flag.data<bool>()[0] = s;
    fused.run({{"skip", flag}, {"grad", g}});
    unfused.run({{"skip", flag}, {"grad", g}});
    // Copies: state() returns a new map each call.
    const rt::Tensor got = fused.state().at("w");
    const rt::Tensor want = unfused.state().at("w");
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << "skip " << s;
  }
  EXPECT_EQ(fused.state().at("w").data<float>()[0], 1.5f + 2 * 0.25f) << "two steps applied";
}

TEST(Fusion, GuardIsNotUsedWhenTheStateIsReadLater) {
  // The new value is also a graph output computed from the Where: the Where's result is
  // read, so the update stays a plain Where.
  Builder b;
  ir::Value* skip = b.input("skip", {}, DType::kBool);
  ir::Value* grad = b.input("grad", {6});
  ir::Value* state = b.constant("w", 1.5f, {6});
  ir::Value* source = b.op("Where", {skip, state, b.op("Sub", {state, grad}, {6})}, {6});
  b.model.state_updates.push_back({state, source});
  b.output(b.op("Sqrt", {b.op("Abs", {source}, {6})}, {6}));
  for (const auto& s : b.fuse()) {
    if (s.fused()) {
      EXPECT_EQ(s.segments[0].guard, nullptr);
    }
  }
}

TEST(Fusion, NodesTheKernelsCannotExpressStayUnfused) {
  Builder b;
  ir::Value* x = b.input("x", {4});
  ir::Value* i = b.input("i", {4}, DType::kInt64);
  ir::Value* ia = b.op("Add", {i, i}, {4}, DType::kInt64);  // integer: not fusible
  ir::Value* c = b.op("Cast", {ia}, {4});
  b.model.graph->nodes.back()->attributes.push_back(
      ir::Attribute::make_int("to", static_cast<int64_t>(kF32)));
  b.output(b.op("Add", {b.op("Mod", {x, x}, {4}), c}, {4}));  // Mod: not in the instruction set
  for (const auto& n : b.model.graph->nodes) {
    EXPECT_EQ(lower::is_fusible(b.model, *n),
              n->op_type == "Add" && n->outputs[0]->type.dtype == kF32)
        << n->label();
  }
}

// Clip (ReLU6, as torch exports it: scalar constant bounds) fuses with its neighbours as a
// bound instruction each, only for the bounds given (torch.clamp(x, max=m) omits the lower
// one); Clip with a bound that is not a scalar, or its opset-6 attributes, stays a step of its
// own (the CPU op; on the CUDA backend a refusal).
TEST(Fusion, ClipWithScalarBoundsFusesAsBoundInstructions) {
  Builder b;
  ir::Value* x = b.input("x", {4, 8});
  ir::Value* relu6 = b.op(
      "Clip", {b.op("Add", {x, x}, {4, 8}), b.constant("zero", 0), b.constant("six", 6)}, {4, 8});
  b.output(b.op("Mul", {relu6, x}, {4, 8}));
  const auto steps = b.fuse();
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_TRUE(steps[0].fused());
  EXPECT_EQ(ops_of(steps[0]), (Strings{"Add", "Clip", "Mul"}));
  const auto k = b.kernel(steps[0].segments[0]);
  EXPECT_EQ(instrs(k.def),
            (Strings{"load", "add", "const", "clamp_min", "const", "clamp_max", "mul"}));
  // The fused plan against the unfused one (the CPU Clip op) on values below, inside and
  // above the bounds, zeros of both signs, infinities and a NaN: the same bits.
  const float specials[] = {-0.0f, 0.0f, 2.9f, 3.1f, -1e30f, 1e30f, std::nanf(""), -7.0f};
  rt::Tensor xv(kF32, {4, 8});
  for (int i = 0; i < 32; ++i) set_float(xv, i, i < 8 ? specials[i] : 0.37f * i - 4.0f);
  expect_fused_bits(fused_plan(b.model, "cpu"), b.model, {{"x", xv}}, 1, "relu6");
  // Only a lower bound (a trailing omitted input is dropped): one bound instruction.
  Builder one;
  ir::Value* y = one.input("y", {4});
  one.output(one.op("Relu", {one.op("Clip", {y, one.constant("lo", -1)}, {4})}, {4}));
  const auto one_steps = one.fuse();
  ASSERT_EQ(one_steps.size(), 1u);
  ASSERT_TRUE(one_steps[0].fused());
  EXPECT_EQ(instrs(one.kernel(one_steps[0].segments[0]).def),
            (Strings{"load", "const", "clamp_min", "relu"}));
  // Only an upper bound (the lower one omitted): one bound instruction, the CPU op's bits.
  Builder upper;
  ir::Value* u = upper.input("u", {4, 8});
  upper.output(upper.op("Clip", {upper.op("Add", {u, u}, {4, 8}), nullptr, upper.constant("hi", 6)},
                        {4, 8}));
  const auto upper_steps = upper.fuse();
  ASSERT_EQ(upper_steps.size(), 1u);
  ASSERT_TRUE(upper_steps[0].fused());
  EXPECT_EQ(instrs(upper.kernel(upper_steps[0].segments[0]).def),
            (Strings{"load", "add", "const", "clamp_max"}));
  expect_fused_bits(fused_plan(upper.model, "cpu"), upper.model, {{"u", xv}}, 1, "clamp(max)");
  Builder unfused;
  ir::Value* z = unfused.input("z", {4});
  unfused.output(unfused.op("Clip", {z, unfused.constant("wide", 0, {4})}, {4}));
  unfused.output(unfused.op("Clip", {z}, {4}));
  unfused.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_float("max", 6));
  for (const auto& n : unfused.model.graph->nodes)
    EXPECT_FALSE(lower::is_fusible(unfused.model, *n)) << n->label();
}

// HardSigmoid (its attributes and its defaults) and HardSwish, fused as the CPU ops' expressions
// (lowered for a CUDA target, where each becomes a kernel; the CPU backend runs that plan with
// its host JIT), against the unfused plan (the CPU ops) in every float type, on values around
// the kinks at -3 and 3, zeros of both signs, infinities and NaN: the same bits.
TEST(Fusion, HardActivationsGiveTheCpuOpsBits) {
  const float specials[] = {-0.0f,
                            0.0f,
                            -3.0f,
                            3.0f,
                            -2.9999f,
                            2.9999f,
                            1e30f,
                            -1e30f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::nanf(""),
                            0.1f};
  for (DType t : {kF32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    Builder b;
    ir::Value* x = b.input("x", {64}, t);
    b.output(b.op("HardSigmoid", {x}, {64}, t));
    ir::Node* custom = b.model.graph->nodes.back().get();
    custom->attributes.push_back(ir::Attribute::make_float("alpha", 0.3f));
    custom->attributes.push_back(ir::Attribute::make_float("beta", 0.45f));
    b.output(b.op("HardSigmoid", {x}, {64}, t));
    b.output(b.op("HardSwish", {x}, {64}, t));
    for (const auto& n : b.model.graph->nodes)
      EXPECT_TRUE(lower::is_fusible(b.model, *n)) << n->label();
    rt::Tensor xv(t, {64});
    for (int i = 0; i < 64; ++i) set_float(xv, i, i < 12 ? specials[i] : 0.23f * i - 8.0f);
    expect_fused_bits(fused_plan(b.model, "cuda:sm_90"), b.model, {{"x", xv}}, 3,
                      std::string(dtype_name(t)));
  }
}

// The other activations of torch.nn (LeakyRelu, PRelu with a slope per column, Elu, Celu,
// Selu, Softplus, Softsign, ThresholdedRelu; given attributes and defaults), fused as the CPU
// ops' expressions, against the unfused plan (the CPU ops) in every float type on values
// across the kinks, tiny ones (expm1), large ones of both signs (Softplus' two forms, exp's
// overflow), zeros of both signs, infinities and NaN: the same bits. For a CUDA target, where
// each becomes a kernel; the CPU backend runs that plan with its host JIT.
TEST(Fusion, TorchActivationsGiveTheCpuOpsBits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {-0.0f,  0.0f,  1e-8f,  -1e-8f, 0.5f,   -0.5f, 0.4999f, 20.0f,
                            -20.0f, 90.0f, -90.0f, 1e30f,  -1e30f, inf,   -inf,    std::nanf("")};
  constexpr int kN = 64;
  for (DType t : {kF32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    Builder b;
    ir::Value* x = b.input("x", {4, kN / 4}, t);
    ir::Value* slope = b.input("slope", {kN / 4}, t);
    auto with_alpha = [&](const char* op, float alpha) {
      b.output(b.op(op, {x}, {4, kN / 4}, t));
      b.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_float("alpha", alpha));
    };
    for (const char* op :
         {"LeakyRelu", "Elu", "Celu", "Selu", "Softplus", "Softsign", "ThresholdedRelu"}) {
      b.output(b.op(op, {x}, {4, kN / 4}, t));
    }
    with_alpha("LeakyRelu", 0.2f);
    with_alpha("Elu", 0.7f);
    with_alpha("Celu", 1.3f);
    with_alpha("ThresholdedRelu", -0.25f);
    b.output(b.op("Selu", {x}, {4, kN / 4}, t));
    b.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_float("alpha", 1.5f));
    b.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_float("gamma", 0.9f));
    b.output(b.op("PRelu", {x, slope}, {4, kN / 4}, t));
    for (const auto& n : b.model.graph->nodes)
      EXPECT_TRUE(lower::is_fusible(b.model, *n)) << n->label();
    const plan::Plan fused = fused_plan(b.model, "cuda:sm_90");
    for (const auto& step : fused.steps()) EXPECT_EQ(step.op(), "FusedElementwise");
    rt::Tensor xv(t, {4, kN / 4}), sv(t, {kN / 4});
    for (int i = 0; i < kN; ++i) set_float(xv, i, i < 16 ? specials[i] : 0.23f * (i - 16) - 5.0f);
    for (int i = 0; i < kN / 4; ++i) set_float(sv, i, 0.1f * i - 0.5f);
    expect_fused_bits(fused, b.model, {{"x", xv}, {"slope", sv}}, 13, std::string(dtype_name(t)));
  }
}

// On the CPU a fusible node alone (no neighbour to fuse with) stays the CPU op where its
// result is fp32 and its operands are full or scalars, and becomes a kernel of one member where
// it is fp16 or bf16 (the generated code converts whole vectors) or broadcasts an operand (the
// generated code walks short rows as one loop): a squeeze-excite's broadcasting Mul, in every
// type, and the ampc forms of HardSwish and HardSigmoid (ops/ampc_forms.h), which fuse as
// ONNX's ops do. Either way the same bits as the CPU ops.
TEST(Fusion, SixteenBitOrBroadcastingNodeAloneIsAKernelOnTheCpu) {
  for (DType t : {kF32, DType::kFloat16, DType::kBFloat16}) {
    Builder b;
    b.model.opsets.push_back({"ampc", 1});
    ir::Value* x = b.input("x", {2, 3, 4, 4}, t);
    ir::Value* gate = b.input("gate", {2, 3, 1, 1}, t);
    ir::Value* y = b.input("y", {2, 3, 4, 4}, t);
    ir::Value* z = b.input("z", {2, 3, 1, 1}, t);
    b.output(b.op("Mul", {x, gate}, {2, 3, 4, 4}, t));
    b.output(b.op("HardSwish", {y}, {2, 3, 4, 4}, t));
    b.model.graph->nodes.back()->domain = "ampc";
    b.output(b.op("HardSigmoid", {z}, {2, 3, 1, 1}, t));
    b.model.graph->nodes.back()->domain = "ampc";
    b.model.graph->nodes.back()->attributes.push_back(ir::Attribute::make_float("alpha", 0.3f));
    for (const auto& n : b.model.graph->nodes)
      EXPECT_TRUE(lower::is_fusible(b.model, *n)) << n->label();
    // No two read an input in common, and each output is read by the graph only: three groups
    // of one.
    const plan::Plan plan = fused_plan(b.model, "cpu");
    ASSERT_EQ(plan.steps_size(), 3) << dtype_name(t);
    const bool kernels = t != kF32;
    EXPECT_EQ(plan.steps(0).op(), "FusedElementwise") << dtype_name(t);
    EXPECT_EQ(plan.steps(1).op(), kernels ? "FusedElementwise" : "HardSwish") << dtype_name(t);
    EXPECT_EQ(plan.steps(2).op(), kernels ? "FusedElementwise" : "HardSigmoid") << dtype_name(t);
    rt::Tensor xv(t, {2, 3, 4, 4}), gv(t, {2, 3, 1, 1});
    for (int i = 0; i < 96; ++i) set_float(xv, i, 0.17f * static_cast<float>(i) - 8.0f);
    for (int i = 0; i < 6; ++i) set_float(gv, i, 1.3f * static_cast<float>(i) - 4.0f);
    expect_fused_bits(plan, b.model, {{"x", xv}, {"gate", gv}, {"y", xv}, {"z", gv}}, 3,
                      std::string(dtype_name(t)));
  }
}

// Before opset 7 PRelu's 1-D slope holds one value per channel (axis 1), where numpy's rule,
// which the kernels follow, would spread it over the last axis: such a PRelu stays the CPU op
// on every target. x is 2x3x2x3, so both readings are possible and differ.
TEST(Fusion, OpsetSixPReluKeepsItsPerChannelSlope) {
  Builder b;
  b.model.opsets = {{"", 6}};
  ir::Value* x = b.input("x", {2, 3, 2, 3});
  ir::Value* slope = b.input("slope", {3});
  b.output(b.op("PRelu", {x, slope}, {2, 3, 2, 3}));
  EXPECT_FALSE(lower::is_fusible(b.model, *b.model.graph->nodes.back()));
  for (const char* target : {"cpu", "cuda:sm_90"}) {
    const plan::Plan plan = fused_plan(b.model, target);
    ASSERT_EQ(plan.steps_size(), 1) << target;
    EXPECT_EQ(plan.steps(0).op(), "PRelu") << target;
  }
  rt::Tensor xv(kF32, {2, 3, 2, 3}), sv(kF32, {3});
  for (int i = 0; i < 36; ++i) xv.data<float>()[i] = static_cast<float>(i % 5) - 3.0f;
  for (int c = 0; c < 3; ++c) sv.data<float>()[c] = 0.25f * static_cast<float>(c + 1);
  rt::cpu::Executor run(fused_plan(b.model, "cpu"));
  const rt::Tensor y = run.run({{"x", xv}, {"slope", sv}}).begin()->second;
  for (int i = 0; i < 36; ++i) {
    const float v = xv.data<float>()[i];
    const int channel = (i / 6) % 3;
    EXPECT_EQ(y.data<float>()[i], v < 0 ? sv.data<float>()[channel] * v : v) << i;
  }
  b.model.opsets = {{"", 7}};  // numpy's rule from opset 7: fusible
  EXPECT_TRUE(lower::is_fusible(b.model, *b.model.graph->nodes.back()));
}

// passes/recompute_casts.h: an fp16 copy read early and again much later, whose fp32 source
// is read later still, is cast again just before the late reader; fusion keeps the two casts
// apart (merged, the copy would be computed early and kept again).
struct CastTwiceGraph {
  ir::Value* x;  // fp32 activation
  ir::Value* y;  // its fp16 copy
  ir::Node* late_reader;
};

CastTwiceGraph cast_read_twice(Builder& b, bool source_read_late) {
  constexpr DType kF16 = DType::kFloat16;
  ir::Value* a = b.input("a", {4, 8});
  ir::Value* x = b.op("Relu", {a}, {4, 8});
  ir::Value* y = b.op("Cast", {x}, {4, 8}, kF16);
  b.model.graph->nodes.back()->attributes.push_back(
      ir::Attribute::make_int("to", static_cast<int64_t>(kF16)));
  ir::Value* w = b.input("w", {8, 8}, kF16);
  ir::Value* h = b.op("MatMul", {y, w}, {4, 8}, kF16);
  for (int i = 0; i < 20; ++i) h = b.op("MatMul", {h, w}, {4, 8}, kF16);  // the gap
  ir::Value* late = b.op("MatMul", {y, h}, {4, 8}, kF16);
  ir::Node* late_reader = b.model.graph->nodes.back().get();
  b.output(late);
  if (source_read_late) b.output(b.op("Sigmoid", {x}, {4, 8}));
  return {x, y, late_reader};
}

TEST(RecomputeCasts, LateReaderGetsACopyCastAgainBeforeIt) {
  Builder b;
  const CastTwiceGraph g = cast_read_twice(b, true);
  ASSERT_EQ(passes::recompute_casts(b.model), 1);
  ir::verify(b.model);
  ir::Value* copy = g.late_reader->inputs[0];
  ASSERT_NE(copy, g.y);
  ASSERT_NE(copy->producer, nullptr);
  EXPECT_EQ(copy->producer->op_type, "Cast");
  EXPECT_EQ(copy->producer->inputs[0], g.x);
  EXPECT_EQ(copy->type, g.y->type);
  EXPECT_EQ(g.y->uses.size(), 1u);  // only the early reader keeps the first copy
  // Placed right before its reader.
  const auto& nodes = b.model.graph->nodes;
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    if (nodes[i + 1].get() == g.late_reader) {
      EXPECT_EQ(nodes[i].get(), copy->producer);
    }
  }
  // The recomputation is a step of its own (the first cast may join the Relu's kernel).
  const auto steps = b.fuse();
  expect_valid_schedule(b.model, steps);
  int casts = 0, steps_with_casts = 0;
  for (const auto& s : steps) {
    const Strings ops = ops_of(s);
    const int n = static_cast<int>(std::count(ops.begin(), ops.end(), "Cast"));
    casts += n;
    steps_with_casts += n > 0;
    if (!s.fused() && s.node == copy->producer) continue;  // alone: fine
    for (const auto& g : s.segments) {
      for (const ir::Node* m : g.nodes) {
        if (m == copy->producer) {
          EXPECT_EQ(ops, Strings{"Cast"});
        }
      }
    }
  }
  EXPECT_EQ(casts, 2);
  EXPECT_EQ(steps_with_casts, 2);
}

TEST(RecomputeCasts, NothingWhenTheSourceWouldLiveLonger) {
  Builder b;
  const CastTwiceGraph g = cast_read_twice(b, false);  // x is not read after the gap
  EXPECT_EQ(passes::recompute_casts(b.model), 0);
  EXPECT_EQ(g.late_reader->inputs[0], g.y);
}

// passes/recompute_elementwise.h: a GELU's erf(x / sqrt 2) + 1, read by the forward and much
// later by an elementwise reader where x is read too, is computed again from x just before
// that reader; nothing when x would live longer for it, or when the late reader is a GEMM.
struct GeluGraph {
  ir::Value* x;  // the activation the GELU reads
  ir::Value* a;  // erf(x / sqrt 2) + 1
  ir::Node* late_reader;
};

GeluGraph gelu_read_late(Builder& b, bool x_read_late, bool late_reader_fuses) {
  ir::Value* w = b.input("w", {8, 8});
  ir::Value* x = b.op("MatMul", {b.input("in", {4, 8}), w}, {4, 8});  // not recomputed
  ir::Value* d = b.op("Div", {x, b.constant("sqrt2", 1.41421356f)}, {4, 8});
  ir::Value* a = b.op("Add", {b.op("Erf", {d}, {4, 8}), b.constant("one", 1.0f)}, {4, 8});
  ir::Value* h = b.op("MatMul", {b.op("Mul", {x, a}, {4, 8}), w}, {4, 8});
  for (int i = 0; i < 20; ++i) h = b.op("MatMul", {h, w}, {4, 8});  // the gap
  ir::Value* late = b.op(late_reader_fuses ? "Mul" : "MatMul", {a, h}, {4, 8});
  ir::Node* late_reader = b.model.graph->nodes.back().get();
  b.output(b.op("Add", {late, x_read_late ? x : h}, {4, 8}));
  return {x, a, late_reader};
}

TEST(RecomputeElementwise, LateReaderGetsTheChainComputedAgainFromValuesLiveThere) {
  Builder b;
  const GeluGraph g = gelu_read_late(b, true, true);
  ASSERT_EQ(passes::recompute_elementwise(b.model), 3);  // Div, Erf, Add
  ir::verify(b.model);
  const ir::Value* copy = g.late_reader->inputs[0];
  ASSERT_NE(copy, g.a);
  EXPECT_EQ(g.a->uses.size(), 1u);  // only the forward's Mul reads the first one
  Strings chain;
  const ir::Value* v = copy;
  for (; v->producer && v != g.x; v = v->producer->inputs[0]) chain.push_back(v->producer->op_type);
  EXPECT_EQ(chain, (Strings{"Add", "Erf", "Div"}));
  EXPECT_EQ(v, g.x);
  // The three copies run just before their reader, after the gap.
  const auto& nodes = b.model.graph->nodes;
  for (size_t i = 3; i < nodes.size(); ++i) {
    if (nodes[i].get() == g.late_reader) {
      EXPECT_EQ(nodes[i - 1].get(), copy->producer);
    }
  }
  // The copies fuse with their reader, not with the forward's kernel.
  const auto steps = b.fuse();
  expect_valid_schedule(b.model, steps);
  for (const auto& s : steps) {
    const Strings ops = ops_of(s);
    if (std::count(ops.begin(), ops.end(), "Erf") == 0) continue;
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "Erf"), 1) << "one Erf per kernel";
  }
}

TEST(RecomputeElementwise, NothingWhenASourceWouldLiveLonger) {
  Builder b;
  const GeluGraph g = gelu_read_late(b, false, true);  // x is not read after the gap
  EXPECT_EQ(passes::recompute_elementwise(b.model), 0);
  EXPECT_EQ(g.late_reader->inputs[0], g.a);
}

TEST(RecomputeElementwise, NothingForALateReaderThatDoesNotFuse) {
  Builder b;
  const GeluGraph g = gelu_read_late(b, true, false);  // a GEMM would need the copy written out
  EXPECT_EQ(passes::recompute_elementwise(b.model), 0);
  EXPECT_EQ(g.late_reader->inputs[0], g.a);
}

// A backward node reading a forward value does not join the forward's kernel (it would run
// there and keep its result until the backward), nor a forward sibling's; unless its result is
// smaller than the forward value (ReLU's gradient mask, a bool instead of a float).
TEST(Fusion, ForwardAndBackwardGroupsStayApartUnlessTheResultShrinks) {
  Builder b;
  ir::Value* x = b.input("x", {4, 8});
  ir::Value* f = b.op("Exp", {x}, {4, 8});
  b.output(b.op("Sigmoid", {f}, {4, 8}));
  ir::Value* c = b.constant("c", 3.0f);
  b.output(b.op("Mul", {f, c}, {4, 8}));
  b.output(b.op("Neg", {x}, {4, 8}));
  b.output(b.op("Greater", {f, c}, {4, 8}, DType::kBool));
  for (const auto& n : b.model.graph->nodes) {
    const bool backward = n->op_type == "Mul" || n->op_type == "Neg" || n->op_type == "Greater";
    n->phase = backward ? ir::Phase::kBackward : ir::Phase::kForward;
  }
  const auto steps = b.fuse();
  expect_valid_schedule(b.model, steps);
  std::set<Strings> kernels;
  for (const auto& s : steps) kernels.insert(ops_of(s));
  EXPECT_TRUE(kernels.count(Strings{"Exp", "Sigmoid", "Greater"}));
  EXPECT_TRUE(kernels.count(Strings{"Mul"}));  // not with Exp, its producer
  EXPECT_TRUE(kernels.count(Strings{"Neg"}));  // not with Exp, which reads x too
}

}  // namespace
}  // namespace ampc
