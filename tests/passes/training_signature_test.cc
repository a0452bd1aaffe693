// The plan's training signature and step phases (plan.proto TrainingSignature,
// Step.source_phases), compiled in-process from models/mlp.onnx and models/cnn.onnx:
// - every output the signature names is an output of the plan, placed in the arena as an
//   OUTPUT (so it lives to the end of the step) or held in STATE; the lr, the scale, the
//   micro-step counter and the scaler's state are the buffers the options made;
// - every step of a training plan has a phase, and it agrees with an oracle that does not
//   read the phases: the source model's own node names (forward), the name each pass gives
//   its nodes (grad/, optimizer/, amp/) and the loss scaler's ops;
// - a forward plan has no signature and only forward steps; the model's own state is
//   Buffer.from_model, the optimizer's and the scaler's is not.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>
#include <string>

#include "driver/pipeline.h"

namespace ampc {
namespace {

std::string model_path(const std::string& name) {
  return std::string(AMPC_SOURCE_DIR) + "/models/" + name + ".onnx";
}

onnx::ModelProto source_model(const std::string& name) {
  onnx::ModelProto m;
  std::ifstream f(model_path(name), std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&f));
  return m;
}

// The node names of the source ONNX model: the forward's steps, and nothing else.
std::set<std::string> source_nodes(const std::string& name) {
  std::set<std::string> names;
  const onnx::ModelProto m = source_model(name);
  for (const auto& n : m.graph().node()) names.insert(n.name());
  return names;
}

std::set<std::string> source_initializers(const std::string& name) {
  std::set<std::string> names;
  const onnx::ModelProto m = source_model(name);
  for (const auto& t : m.graph().initializer()) names.insert(t.name());
  return names;
}

compiler::CompileOptions fp16_training(bool fuse) {
  compiler::CompileOptions o;
  o.train = true;
  o.autocast.precision = passes::Precision::kFP16;
  o.optimizer.kind = "adam";
  o.loss_scale.clip_grad_norm = 1.0;
  o.loss_scale.log_grad_norm = true;
  o.accum_steps = 2;
  o.lowering.fuse = fuse;
  return o;
}

const plan::Buffer* buffer(const plan::Plan& p, const std::string& name) {
  for (const auto& b : p.buffers())
    if (b.name() == name) return &b;
  return nullptr;
}

const plan::Buffer* output(const plan::Plan& p, const std::string& name) {
  for (const auto& o : p.outputs())
    if (o.name() == name) return &p.buffers(o.buffer());
  return nullptr;
}

TEST(TrainingSignature, NamesPlannedOutputsAndTheOptionsState) {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    const plan::Plan p = compiler::compile_file(model_path("mlp"), fp16_training(fuse));
    ASSERT_TRUE(p.has_training());
    const plan::TrainingSignature& s = p.training();
    ASSERT_EQ(s.losses_size(), 1);
    EXPECT_EQ(s.losses(0), p.outputs(0).name()) << "the model's first output is the loss";
    for (const std::string& name : {s.loss_scale(), s.found_inf(), s.grad_norm()}) {
      SCOPED_TRACE(name);
      ASSERT_FALSE(name.empty()) << s.DebugString();
      const plan::Buffer* b = output(p, name);
      ASSERT_NE(b, nullptr) << "not an output of the plan";
      // Planned as an output: in the arena it is never reused before the step ends.
      EXPECT_TRUE(b->role() == plan::OUTPUT || b->role() == plan::STATE);
      if (b->role() == plan::OUTPUT) {
        EXPECT_EQ(b->region(), plan::REGION_ARENA);
      }
    }
    EXPECT_TRUE(s.step_lr().empty()) << "no lr schedule was asked for";
    EXPECT_EQ(s.micro_batches(), 2);
    for (const std::string& name : {s.scale_state(), s.lr(), s.micro_step()}) {
      SCOPED_TRACE(name);
      const plan::Buffer* b = buffer(p, name);
      ASSERT_NE(b, nullptr);
      // The lr without a schedule never changes during a step: a constant of the plan.
      EXPECT_EQ(b->role(), name == s.lr() ? plan::CONSTANT : plan::STATE);
      EXPECT_FALSE(b->from_model());
    }
    EXPECT_EQ(s.scaler_state_size(), 2) << "the scale and its growth tracker";
    for (const auto& name : s.scaler_state()) EXPECT_NE(buffer(p, name), nullptr) << name;
    // The model's parameters keep their ONNX initializer names; what the compiler adds
    // (moments, counters, the scaler) does not come from the model.
    const std::set<std::string> initializers = source_initializers("mlp");
    for (const auto& b : p.buffers()) {
      if (b.role() == plan::STATE) {
        EXPECT_EQ(b.from_model(), initializers.count(b.name()) > 0) << b.name();
      }
    }
  }
}

// The oracle of a step's phase, from what the passes name their nodes and the ops they use.
plan::StepPhase expected_phase(const std::string& node, const std::string& op,
                               const std::set<std::string>& forward) {
  if (forward.count(node)) return plan::FORWARD;
  if (node.starts_with("grad/")) return plan::BACKWARD;
  if (node.starts_with("optimizer/")) return plan::OPTIMIZER;
  if (node.starts_with("amp/") || op == "UnscaleCheck" || op == "UpdateScale")
    return plan::LOSS_SCALING;
  return plan::PHASE_UNSPECIFIED;  // a node the oracle cannot place
}

TEST(StepPhases, EveryStepOfATrainingPlanHasTheRightOne) {
  for (const std::string model : {"mlp", "cnn"}) {
    SCOPED_TRACE(model);
    const std::set<std::string> forward = source_nodes(model);
    const plan::Plan p = compiler::compile_file(model_path(model), fp16_training(false));
    std::set<plan::StepPhase> seen;
    int checked = 0;
    for (const auto& s : p.steps()) {
      ASSERT_EQ(s.source_phases_size(), s.source_nodes_size()) << s.op();
      for (int i = 0; i < s.source_nodes_size(); ++i) {
        const plan::StepPhase phase = s.source_phases(i);
        EXPECT_NE(phase, plan::PHASE_UNSPECIFIED) << s.source_nodes(i);
        seen.insert(phase);
        const plan::StepPhase want = expected_phase(s.source_nodes(i), s.op(), forward);
        if (want == plan::PHASE_UNSPECIFIED) continue;
        ++checked;
        EXPECT_EQ(phase, want) << s.source_nodes(i) << " (" << s.op() << ")";
      }
    }
    EXPECT_GT(checked, p.steps_size() / 2) << "the oracle placed too few steps to mean much";
    EXPECT_EQ(seen, (std::set<plan::StepPhase>{plan::FORWARD, plan::BACKWARD, plan::LOSS_SCALING,
                                               plan::OPTIMIZER}));
  }
}

TEST(StepPhases, FusedStepsKeepTheirMembersPhases) {
  const plan::Plan p = compiler::compile_file(model_path("mlp"), fp16_training(true));
  const std::set<std::string> forward = source_nodes("mlp");
  for (const auto& s : p.steps()) {
    ASSERT_EQ(s.source_phases_size(), s.source_nodes_size());
    for (int i = 0; i < s.source_nodes_size(); ++i) {
      EXPECT_NE(s.source_phases(i), plan::PHASE_UNSPECIFIED) << s.source_nodes(i);
      if (forward.count(s.source_nodes(i))) {
        EXPECT_EQ(s.source_phases(i), plan::FORWARD);
      }
      if (s.source_nodes(i).starts_with("grad/")) {
        EXPECT_EQ(s.source_phases(i), plan::BACKWARD);
      }
    }
  }
}

TEST(StepPhases, AForwardPlanIsAllForwardWithoutASignature) {
  compiler::CompileOptions o;
  const plan::Plan p = compiler::compile_file(model_path("mlp"), o);
  EXPECT_FALSE(p.has_training());
  for (const auto& s : p.steps())
    for (int i = 0; i < s.source_phases_size(); ++i)
      EXPECT_EQ(s.source_phases(i), plan::FORWARD) << s.source_nodes(i);
}

}  // namespace
}  // namespace ampc
