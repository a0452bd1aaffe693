// Round trip of the example models (models/{mlp,cnn,gpt}.onnx): load -> export -> ONNX full
// check -> save to a file -> load again -> the two IRs print identically, and the export
// keeps every node, attribute, name and weight of the original file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "base/error.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/read_model.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/onnx/roundtrip_check.h"

namespace ampc {
namespace {
namespace fs = std::filesystem;

struct ExampleModel {
  const char* name;
  size_t nodes;  // as models/README.md lists them
  size_t initializers;
  const char* output_type;
};

const ExampleModel kModels[] = {
    {"mlp", 12, 6, "f32[]"},
    {"cnn", 11, 14, "f32[]"},
    {"gpt", 210, 40, "f32[]"},
};

void PrintTo(const ExampleModel& m, std::ostream* os) {
  *os << m.name;
}

class ModelRoundTrip : public ::testing::TestWithParam<ExampleModel> {
 protected:
  void SetUp() override {
    path_ = fs::path(AMPC_SOURCE_DIR) / "models" / (std::string(GetParam().name) + ".onnx");
    ASSERT_TRUE(fs::exists(path_)) << path_;
    dir_ = fs::temp_directory_path() /
           ("ampc_roundtrip_" + std::string(GetParam().name) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path path_;
  fs::path dir_;
};

TEST_P(ModelRoundTrip, ExportPassesFullCheckAndReimportsIdentical) {
  const auto first = onnx_io::load_model(path_.string());
  const onnx::ModelProto original = onnx_io::read_model_proto(path_.string());
  EXPECT_EQ(first->graph->nodes.size(), GetParam().nodes);
  EXPECT_EQ(first->graph->nodes.size(), static_cast<size_t>(original.graph().node_size()));
  EXPECT_EQ(first->graph->initializers.size(), GetParam().initializers);
  EXPECT_EQ(first->graph->initializers.size(),
            static_cast<size_t>(original.graph().initializer_size()));
  ASSERT_EQ(first->graph->outputs.size(), 1u);
  EXPECT_EQ(first->graph->outputs[0]->name, "loss");
  EXPECT_EQ(first->graph->outputs[0]->type.str(), GetParam().output_type);

  const onnx::ModelProto exported = onnx_io::export_model(*first);
  EXPECT_NO_THROW(onnx_io::check_model(exported));
  EXPECT_EQ(testing::structure_difference(original, exported), "");

  const fs::path copy = dir_ / "copy.onnx";
  onnx_io::save_model(*first, copy.string());
  const auto second = onnx_io::load_model(copy.string());
  const std::string a = ir::to_text(*first);
  const std::string b = ir::to_text(*second);
  EXPECT_EQ(testing::first_difference(a, b), "identical");
  EXPECT_EQ(a, b);

  // Export is a fixed point: the re-imported model writes the same bytes.
  std::string bytes1, bytes2;
  ASSERT_TRUE(exported.SerializeToString(&bytes1));
  ASSERT_TRUE(onnx_io::export_model(*second).SerializeToString(&bytes2));
  EXPECT_TRUE(bytes1 == bytes2) << "second export differs from the first (" << bytes1.size()
                                << " vs " << bytes2.size() << " bytes)";
  // No temporary file from save_model is left beside the copy.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);
}

// The compiler relies on this: after import every value has an element type and a static
// shape (shape inference through libonnx filled them in).
TEST_P(ModelRoundTrip, EveryValueHasATypeAndStaticShape) {
  const auto model = onnx_io::load_model(path_.string());
  size_t checked = 0;
  for (const auto& v : model->graph->values) {
    EXPECT_NE(v->type.dtype, DType::kUndefined) << "value '" << v->name << "'";
    EXPECT_TRUE(v->type.is_static()) << "value '" << v->name << "' is " << v->type.str();
    ++checked;
  }
  EXPECT_GT(checked, GetParam().nodes);
  EXPECT_NO_THROW(ir::verify(*model));
}

// With require_static_inputs=false a symbolic batch dimension survives the round trip (as
// an unknown dimension; ONNX's test data has no such model that otherwise round-trips).
TEST(DynamicRoundTrip, SymbolicBatchDimensionSurvives) {
  onnx::ModelProto proto =
      onnx_io::read_model_proto((fs::path(AMPC_SOURCE_DIR) / "models" / "mlp.onnx").string());
  for (auto& in : *proto.mutable_graph()->mutable_input()) {
    in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(
        "batch");
  }
  onnx_io::ImportOptions options;
  options.require_static_inputs = false;
  const auto first = onnx_io::import_model(proto, options);
  EXPECT_EQ(first->graph->inputs[0]->type.str(), "f32[?,64]");
  EXPECT_EQ(first->graph->inputs[1]->type.str(), "i64[?]");
  const onnx::ModelProto exported = onnx_io::export_model(*first);
  EXPECT_NO_THROW(onnx_io::check_model(exported));
  onnx::ModelProto copy = exported;
  const auto second = onnx_io::import_model(copy, options);
  EXPECT_EQ(ir::to_text(*first), ir::to_text(*second));
  // The compiler's default still refuses it, naming the input.
  onnx::ModelProto strict = exported;
  try {
    onnx_io::import_model(strict);
    ADD_FAILURE() << "a dynamic input was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("input 'x' has dynamic dimension 0"));
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ModelRoundTrip, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ampc
