// The pass manager (driver/pass_manager.h) and the pipeline run through it: a pass that
// breaks the IR is named when verification is on; --print-after prints the IR the model has
// after that pass, compared to the IR of a model taken through the same passes by hand; an
// unknown pass name is refused with the list of valid ones; verification after every pass
// changes nothing in a compiled plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "driver/pass_manager.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "ir/phase.h"
#include "ir/printer.h"
#include "passes/autocast.h"
#include "passes/autodiff/gradient_op.h"
#include "passes/constant_folding.h"
#include "passes/lower_resize.h"
#include "passes/recurrent_lowering.h"
#include "passes/static_shapes.h"

namespace ampc::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string model_path(const std::string& name) {
  return std::string(AMPC_SOURCE_DIR) + "/models/" + name + ".onnx";
}

// x: f32[2,3] input; y = Relu(x) "relu"; z = Neg(y) "neg"; output z.
std::unique_ptr<ir::Model> small_model() {
  auto m = std::make_unique<ir::Model>();
  m->opsets.push_back({"", 17});
  ir::Graph& g = *m->graph;
  g.name = "g";
  ir::Value* x = g.add_value("x", {DType::kFloat32, std::vector<int64_t>{2, 3}});
  x->is_graph_input = true;
  g.inputs.push_back(x);
  ir::Value* y = g.add_value("y", {DType::kFloat32, std::vector<int64_t>{2, 3}});
  ir::Value* z = g.add_value("z", {DType::kFloat32, std::vector<int64_t>{2, 3}});
  g.add_node("Relu", {x}, {y}, "relu");
  g.add_node("Neg", {y}, {z}, "neg");
  g.outputs.push_back(z);
  return m;
}

// Rewires Neg to read x without moving the use: y keeps a use Neg no longer holds.
void leave_dangling_use(ir::Model& m) {
  ir::Node* neg = m.graph->nodes[1].get();
  neg->inputs[0] = m.graph->find_value("x");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

PassOptions verifying(bool on) {
  PassOptions o;
  o.verify_each = on;
  return o;
}

TEST(PassManager, NamesThePassThatBrokeTheIr) {
  auto model = small_model();
  std::vector<std::string> ran;
  std::vector<Pass> passes = {
      {"harmless", [&](ir::Model&) { ran.push_back("harmless"); }},
      {"corrupt",
       [&](ir::Model& m) {
         ran.push_back("corrupt");
         leave_dangling_use(m);
       }},
      {"after", [&](ir::Model&) { ran.push_back("after"); }},
  };
  const std::string e = error_of([&] { PassManager(passes, verifying(true)).run(*model); });
  EXPECT_THAT(e, HasSubstr("after pass 'corrupt'"));
  EXPECT_THAT(e, Not(HasSubstr("harmless")));
  EXPECT_THAT(ran, ElementsAre("harmless", "corrupt"));  // nothing runs on a broken IR

  // Without verification the manager runs on (what debug builds do unless told).
  auto unchecked = small_model();
  ran.clear();
  PassManager(passes, verifying(false)).run(*unchecked);
  EXPECT_THAT(ran, ElementsAre("harmless", "corrupt", "after"));
}

TEST(PassManager, SetsThePhaseAPassBuildsAndSkipsDisabledPasses) {
  auto model = small_model();
  std::vector<ir::Phase> seen;
  auto record = [&](ir::Model& m) { seen.push_back(m.graph->build_phase); };
  PassManager({{"backward", record, ir::Phase::kBackward},
               {"inherits", record},
               {"disabled", record, ir::Phase::kOptimizer, [] { return false; }},
               {"unknown", record, ir::Phase::kUnknown}})
      .run(*model);
  EXPECT_THAT(seen, ElementsAre(ir::Phase::kBackward, ir::Phase::kBackward, ir::Phase::kUnknown));
}

TEST(PassManager, TimesEachPassThatRuns) {
  auto model = small_model();
  StageTimes times;
  PassManager({{"a", [](ir::Model&) {}}, {"b", [](ir::Model&) {}, {}, [] { return false; }}}, {},
              {}, &times)
      .run(*model);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].stage, "a");
  EXPECT_EQ(times[0].nodes, 2);
}

PassOptions printing(std::vector<std::string> names) {
  PassOptions o;
  o.print_after = std::move(names);
  return o;
}

TEST(PassManager, RefusesAnUnknownPassNameListingTheValidOnes) {
  auto model = small_model();
  bool ran = false;
  const std::string e = error_of([&] {
    PassManager({{"first", [&](ir::Model&) { ran = true; }}, {"second", [](ir::Model&) {}}},
                printing({"first", "thrid"}))
        .run(*model);
  });
  EXPECT_EQ(e, "--print-after: unknown pass 'thrid'; the passes are: all, first, second");
  EXPECT_FALSE(ran);  // refused before anything runs

  // The pipeline does the same with its own names.
  const std::string pipeline_error = error_of([] {
    CompileOptions options;
    options.passes.print_after = {"no-such-pass"};
    compile_file(model_path("mlp"), options);
  });
  EXPECT_THAT(pipeline_error, HasSubstr("unknown pass 'no-such-pass'"));
  for (const auto& name : pipeline_pass_names())
    EXPECT_THAT(pipeline_error, HasSubstr(name)) << name;
  EXPECT_EQ(pipeline_error.find('\n'), std::string::npos);
}

TEST(PassManager, PipelineNamesAreInOrderAndDistinct) {
  const std::vector<std::string> names = pipeline_pass_names();
  std::set<std::string> distinct(names.begin(), names.end());
  EXPECT_EQ(distinct.size(), names.size());
  auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n); };
  EXPECT_LT(at("fold-static-shapes"), at("autocast"));
  EXPECT_LT(at("autocast"), at("autodiff"));
  EXPECT_LT(at("autodiff"), at("optimizer"));
  EXPECT_LT(at("optimizer"), at("export-training-model"));
  EXPECT_NE(at("recompute-casts"), names.end());
  EXPECT_EQ(distinct.count("all"), 0u);
}

// The mlp in fp16 taken through the forward preparation and autocast by hand, calling the
// passes themselves (not the pass lists the pipeline is made of).
std::string fp16_forward_by_hand() {
  auto model = onnx_io::load_model(model_path("mlp"));
  ir::set_phase(*model->graph, ir::Phase::kForward);
  passes::fold_static_shapes(*model);
  passes::lower_resize(*model);
  if (passes::expand_gradient_ops(*model) > 0) passes::fold_constants(*model);
  passes::lower_recurrent_layers(*model, {.cast_projections = true});
  passes::AutocastOptions autocast;
  autocast.precision = passes::Precision::kFP16;
  passes::apply_autocast(*model, autocast);
  return ir::to_text(*model);
}

TEST(PassManager, PrintAfterPrintsTheIrAtThatPoint) {
  std::ostringstream printed;
  CompileOptions options;
  options.train = true;
  options.autocast.precision = passes::Precision::kFP16;
  options.passes.print_after = {"autocast"};
  options.passes.print_to = &printed;
  compile_file(model_path("mlp"), options);
  const std::string expected = print_after_header("autocast") + fp16_forward_by_hand();
  EXPECT_EQ(printed.str(), expected);
  EXPECT_THAT(printed.str(), HasSubstr("Cast"));
}

TEST(PassManager, PrintAfterAllPrintsEveryPassThatRuns) {
  std::ostringstream printed;
  CompileOptions options;
  options.passes.print_after = {"all"};
  options.passes.print_to = &printed;
  compile_file(model_path("mlp"), options);
  const std::string text = printed.str();
  // A forward fp32 compile: no training pass, no cast cleanup.
  for (const char* ran : {"mark-phases", "fold-static-shapes", "autocast", "eliminate-dead-code",
                          "verify", "trainer-outputs"})
    EXPECT_THAT(text, HasSubstr(print_after_header(ran))) << ran;
  for (const char* skipped : {"cast-cleanup", "autodiff", "export-training-model"})
    EXPECT_THAT(text, Not(HasSubstr(print_after_header(skipped)))) << skipped;
}

// Verification after every pass finds every intermediate IR valid, and changes nothing.
TEST(PassManager, VerifyEachLeavesTheTrainingPlanAsItIs) {
  for (auto precision : {passes::Precision::kFP32, passes::Precision::kFP16}) {
    CompileOptions options;
    options.train = true;
    options.autocast.precision = precision;
    options.accum_steps = 2;
    options.passes.verify_each = false;
    const std::string plain = compile_file(model_path("mlp"), options).SerializeAsString();
    options.passes.verify_each = true;
    const std::string verified = compile_file(model_path("mlp"), options).SerializeAsString();
    EXPECT_TRUE(plain == verified) << passes::precision_name(precision);
  }
}

}  // namespace
}  // namespace ampc::compiler
