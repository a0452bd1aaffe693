// ONNX's training format (TrainingInfoProto) in and out. For models/mlp.onnx and
// models/cnn.onnx (BatchNormalization running statistics as state), compiled for training
// with SGD-momentum: the exported training model passes ONNX's full check, binds every STATE
// buffer of the plan, and re-imported (ImportOptions::training) compiles into a plan whose
// 3 steps on the same random batch give bit-identical state and loss. The plan's embedded
// training_model keeps Plan.training_model's contract (plan.proto). check_model checks the
// combined training graph. Malformed training information is refused with a message naming what is
// wrong, and an import for inference takes the main graph only. ai.onnx.preview.training's Gradient
// op becomes the gradient graph: with broadcasting, and zero for an x that y does not depend on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/export_training.h"
#include "frontend/onnx/import.h"
#include "runtime/cpu/executor.h"
#include "runtime/state_copies.h"
#include "tests/support/random_batch.h"
#include "tests/support/temp_dir.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 3;

std::string model_path(const std::string& name) {
  return std::string(AMPC_SOURCE_DIR) + "/models/" + name + ".onnx";
}

compiler::CompileOptions sgd_momentum() {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "sgd";
  o.optimizer.lr = 0.1;
  o.optimizer.momentum = 0.9;
  return o;
}

struct Trained {
  std::map<std::string, rt::Tensor> state;
  std::map<std::string, rt::Tensor> outputs;  // of the last step
};

Trained train(const plan::Plan& p, const std::map<std::string, rt::Tensor>& batch) {
  rt::cpu::Executor exec(p);
  Trained t;
  for (int s = 0; s < kSteps; ++s) t.outputs = exec.run(batch);
  t.state = exec.state();
  return t;
}

bool same_bits(const rt::Tensor& a, const rt::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::set<std::string> state_names(const plan::Plan& p) {
  std::set<std::string> names;
  for (const auto& b : p.buffers()) {
    if (b.role() == plan::STATE) names.insert(b.name());
  }
  return names;
}

bool has_data(const onnx::TensorProto& t) {
  return !t.raw_data().empty() || t.float_data_size() || t.int32_data_size() ||
         t.int64_data_size() || t.double_data_size() || t.uint64_data_size() ||
         t.string_data_size() || t.external_data_size();
}

void write_model(const onnx::ModelProto& proto, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  ASSERT_TRUE(proto.SerializeToOstream(&out));
}

class TrainingFormat : public ::testing::TestWithParam<std::string> {
 protected:
  test::TempDir dir_;
};

TEST_P(TrainingFormat, ExportReimportTrainsBitIdentically) {
  const compiler::CompileOptions options = sgd_momentum();
  auto model = compiler::load_for_compile(model_path(GetParam()), options);
  const plan::Plan direct = compiler::compile_model(*model, options, GetParam());

  const onnx::ModelProto proto = onnx_io::export_training_model(*model);
  EXPECT_NO_THROW(onnx_io::check_model(proto));
  ASSERT_EQ(proto.training_info_size(), 1);
  std::set<std::string> bound;
  for (const auto& b : proto.training_info(0).update_binding()) bound.insert(b.key());
  EXPECT_EQ(bound, state_names(direct)) << "every STATE buffer is a bound initializer";
  EXPECT_EQ(proto.training_info(0).update_binding_size(), direct.state_updates_size());

  // Re-imported in training format: the same training step, used as it is.
  const std::string file = dir_ / "train.onnx";
  write_model(proto, file);
  compiler::CompileOptions again;
  again.train = true;
  auto reimported = compiler::load_for_compile(file, again);
  EXPECT_EQ(reimported->state_updates.size(), model->state_updates.size());
  const plan::Plan replayed = compiler::compile_model(*reimported, again, GetParam());
  EXPECT_EQ(state_names(replayed), state_names(direct));

  const auto batch = test::random_batch(direct, 1234);
  const Trained want = train(direct, batch);
  const Trained got = train(replayed, batch);
  ASSERT_EQ(got.state.size(), want.state.size());
  // Training moved the parameters: the comparison is not between two untouched states.
  int moved = 0;
  for (const auto& b : direct.buffers()) {
    if (b.role() != plan::STATE) continue;
    const rt::Tensor& now = want.state.at(b.name());
    moved += !same_bits(rt::initial_value(direct, b), now);
  }
  EXPECT_GT(moved, 0);
  for (const auto& [name, tensor] : want.state) {
    ASSERT_TRUE(got.state.count(name)) << name;
    EXPECT_TRUE(same_bits(got.state.at(name), tensor)) << "state '" << name << "' differs";
  }
  for (const auto& [name, tensor] : want.outputs)
    EXPECT_TRUE(same_bits(got.outputs.at(name), tensor)) << "output '" << name << "' differs";
}

TEST_P(TrainingFormat, EmbeddedTrainingModelKeepsThePlanContract) {
  const plan::Plan p = compiler::compile_file(model_path(GetParam()), sgd_momentum());
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(p.training_model()));
  ASSERT_EQ(proto.training_info_size(), 1);
  std::map<std::string, onnx::TensorProto*> initializers;
  for (auto& t : *proto.mutable_graph()->mutable_initializer()) initializers[t.name()] = &t;
  for (auto& t : *proto.mutable_training_info(0)->mutable_algorithm()->mutable_initializer())
    initializers[t.name()] = &t;
  const std::set<std::string> state = state_names(p);
  EXPECT_FALSE(state.empty());
  for (const auto& name : state) {
    auto it = initializers.find(name);
    ASSERT_NE(it, initializers.end()) << "STATE buffer '" << name << "' is no initializer";
    EXPECT_FALSE(has_data(*it->second)) << "initializer '" << name << "' carries data";
  }
  for (const auto& [name, t] : initializers) {
    if (!state.count(name)) {
      EXPECT_TRUE(has_data(*t)) << "initializer '" << name << "' lost its data";
    }
  }
  // With the STATE buffers' initial values put back, it is the exported training model.
  for (const auto& b : p.buffers()) {
    if (b.role() != plan::STATE) continue;
    const rt::Tensor value = rt::initial_value(p, b);
    initializers.at(b.name())->set_raw_data(value.raw(), value.nbytes());
  }
  EXPECT_NO_THROW(onnx_io::check_model(proto));
}

INSTANTIATE_TEST_SUITE_P(Models, TrainingFormat, ::testing::Values("mlp", "cnn"));

// The exported mlp training model, for the refusals below.
onnx::ModelProto mlp_training_model() {
  compiler::CompileOptions o = sgd_momentum();
  auto model = compiler::load_for_compile(model_path("mlp"), o);
  compiler::compile_model(*model, o, "mlp");
  return onnx_io::export_training_model(*model);
}

std::string import_error(onnx::ModelProto proto) {
  onnx_io::ImportOptions o;
  o.training = true;
  try {
    onnx_io::import_model(proto, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainingFormatImport, BindingToAValueThatIsNoInitializerIsRefused) {
  onnx::ModelProto proto = mlp_training_model();
  auto* b = proto.mutable_training_info(0)->mutable_update_binding(0);
  b->set_key(proto.graph().input(0).name());
  EXPECT_THAT(import_error(proto), HasSubstr("'x' is not an initializer"));
}

TEST(TrainingFormatImport, BindingFromAMissingOutputIsRefused) {
  onnx::ModelProto proto = mlp_training_model();
  proto.mutable_training_info(0)->mutable_update_binding(0)->set_value("nowhere");
  EXPECT_THAT(import_error(proto), HasSubstr("'nowhere' is not an output of the algorithm"));
}

TEST(TrainingFormatImport, InitializationGraphsAndSeveralTrainingInfosAreRefused) {
  onnx::ModelProto proto = mlp_training_model();
  onnx::ModelProto two = proto;
  *two.add_training_info() = proto.training_info(0);
  EXPECT_THAT(import_error(two), HasSubstr("2 TrainingInfoProtos; only one"));
  auto* init = proto.mutable_training_info(0)->mutable_initialization();
  *init->add_node() = proto.graph().node(0);
  EXPECT_THAT(import_error(proto), HasSubstr("initialization graphs are not supported"));
}

TEST(TrainingFormatCheck, TheCombinedTrainingGraphIsChecked) {
  onnx::ModelProto proto = mlp_training_model();
  // An algorithm node whose input nothing produces: only the combined graph shows it.
  proto.mutable_training_info(0)->mutable_algorithm()->mutable_node(0)->set_input(0, "missing");
  EXPECT_THROW(onnx_io::check_model(proto), Error);
  onnx::ModelProto unbound = mlp_training_model();
  unbound.mutable_training_info(0)->mutable_update_binding(0)->set_key("x");
  EXPECT_THROW(onnx_io::check_model(unbound), Error);
}

TEST(TrainingFormatImport, InferenceImportTakesTheMainGraphOnly) {
  onnx::ModelProto proto = mlp_training_model();
  const int main_nodes = proto.graph().node_size();
  auto model = onnx_io::import_model(proto, {});
  EXPECT_EQ(static_cast<int>(model->graph->nodes.size()), main_nodes);
  EXPECT_TRUE(model->state_updates.empty());
}

TEST(TrainingFormatImport, OptimizerOptionsForATrainingFormatModelAreRefused) {
  test::TempDir dir;
  const std::string file = dir / "train.onnx";
  write_model(mlp_training_model(), file);
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer_options_given = true;
  try {
    compiler::compile_file(file, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("already holds its training step"));
  }
}

// y = a + b with a f32[2,3], b f32[3] broadcast; z f32[3] is unused: Gradient(xs=[a, b, z],
// y=c) gives ones, 2s (b is added to both rows) and zeros, under the output names.
TEST(GradientOp, ExpandsIntoTheGradientGraph) {
  ir::Model m;
  m.opsets = {{"", 13}, {"ai.onnx.preview.training", 1}};
  ir::Graph& g = *m.graph;
  auto input = [&](const std::string& name, std::vector<int64_t> dims) {
    ir::Value* v = g.add_value(name, {DType::kFloat32, dims});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  };
  ir::Value* a = input("a", {2, 3});
  ir::Value* b = input("b", {3});
  ir::Value* z = input("z", {3});
  ir::Value* c = g.add_value("c", a->type);
  g.add_node("Add", {a, b}, {c}, "add");
  std::vector<ir::Value*> grads = {g.add_value("da", a->type), g.add_value("db", b->type),
                                   g.add_value("dz", z->type)};
  ir::Node* grad = g.add_node("Gradient", {a, b, z}, grads, "grad", "ai.onnx.preview.training");
  ir::Attribute xs;
  xs.name = "xs";
  xs.kind = ir::AttrKind::kStrings;
  xs.strings = {"a", "b", "z"};
  grad->attributes.push_back(std::move(xs));
  grad->attributes.push_back(ir::Attribute::make_string("y", "c"));
  g.outputs = {c, grads[0], grads[1], grads[2]};

  rt::cpu::Executor exec(compiler::compile_model(m, {}, "gradient"));
  for (const auto& n : m.graph->nodes) EXPECT_NE(n->op_type, "Gradient");
  std::map<std::string, rt::Tensor> feeds;
  for (const ir::Value* v : {a, b, z}) {
    rt::Tensor t(DType::kFloat32, *v->type.shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.5f * static_cast<float>(i);
    feeds[v->name] = std::move(t);
  }
  const auto out = exec.run(feeds);
  auto values = [&](const std::string& name) {
    const rt::Tensor& t = out.at(name);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  EXPECT_EQ(values("da"), std::vector<float>(6, 1.0f));
  EXPECT_EQ(values("db"), std::vector<float>(3, 2.0f));
  EXPECT_EQ(values("dz"), std::vector<float>(3, 0.0f));
}

}  // namespace
}  // namespace ampc
