// `ampc inspect` on bad input, run as a separate process: each case exits with code 1, prints
// exactly one line on stderr ("ampc: error: ..." naming the problem and the node or input),
// nothing on stdout, does not crash, and leaves no output or temporary file behind even when
// --dot/--svg were asked for. The bad models are made on the fly from models/mlp.onnx.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/onnx/import.h"
#include "ir/printer.h"
#include "tests/cli/cli_util.h"
#include "tests/support/onnx_builder.h"

namespace ampc::testing {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(model_dir_);
    fs::create_directories(out_dir_);
    mlp_ = read_proto(source_path("models/mlp.onnx"));
  }

  // Runs `ampc inspect MODEL [extra]` plain, with --format json, and with --dot/--svg into an
  // empty folder: every run must be refused the same clean way. Returns the message.
  std::string expect_refused(const fs::path& model, const std::string& fragment,
                             const std::vector<std::string>& extra = {}) {
    const auto model_dir_before = list_dir(model.parent_path());
    const std::vector<std::vector<std::string>> variants = {
        {},
        {"--format", "json"},
        {"--dot", (out_dir_ / "graph.dot").string(), "--svg", (out_dir_ / "graph.svg").string()},
        {"--svg", (out_dir_ / "graph.svg").string(), "--format", "json"},
    };
    std::string message;
    for (const auto& variant : variants) {
      std::vector<std::string> args{"inspect", model.string()};
      args.insert(args.end(), extra.begin(), extra.end());
      args.insert(args.end(), variant.begin(), variant.end());
      std::string shown;
      for (const auto& a : args) shown += " " + a;
      SCOPED_TRACE("ampc" + shown);
      const RunResult r = run_ampc(args);
      EXPECT_EQ(r.term_signal, 0) << "crashed";
      EXPECT_EQ(r.exit_code, 1);
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr:\n" << r.err;
      EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << "stderr:\n" << r.err;
      EXPECT_THAT(r.err, StartsWith("ampc: error: "));
      EXPECT_THAT(r.err, HasSubstr(fragment));
      EXPECT_EQ(r.out, "") << "partial output on stdout";
      EXPECT_THAT(list_dir(out_dir_), ::testing::IsEmpty())
          << "output or temporary file left behind";
      EXPECT_EQ(list_dir(model.parent_path()), model_dir_before)
          << "files appeared beside the model";
      message = r.err;
    }
    return message;
  }

  // Writes a modified copy of mlp.onnx into the model folder.
  fs::path write_model(const onnx::ModelProto& proto, const std::string& name = "model.onnx") {
    const fs::path p = model_dir_ / name;
    write_proto(proto, p);
    return p;
  }

  onnx::NodeProto* node(onnx::ModelProto& proto, const std::string& name) {
    for (auto& n : *proto.mutable_graph()->mutable_node()) {
      if (n.name() == name) return &n;
    }
    ADD_FAILURE() << "mlp.onnx has no node " << name;
    return proto.mutable_graph()->mutable_node(0);
  }

  onnx::TensorProto* initializer(onnx::ModelProto& proto, const std::string& name) {
    for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
      if (t.name() == name) return &t;
    }
    ADD_FAILURE() << "mlp.onnx has no initializer " << name;
    return proto.mutable_graph()->mutable_initializer(0);
  }

  // Moves an initializer's data out of the model: `location` as the file records it, the
  // bytes written to `file` at `offset`.
  void externalise(onnx::ModelProto& proto, const std::string& tensor, const std::string& location,
                   const fs::path& file, size_t offset = 0) {
    onnx::TensorProto* t = initializer(proto, tensor);
    std::string bytes = fs::exists(file) ? read_bytes(file) : std::string();
    bytes.resize(std::max(bytes.size(), offset));
    bytes.replace(offset, t->raw_data().size(), t->raw_data());
    fs::create_directories(file.parent_path());
    write_bytes(file, bytes);
    const size_t length = t->raw_data().size();
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [t](const std::string& k, const std::string& v) {
      auto* kv = t->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
  }

  TempDir tmp_;
  fs::path model_dir_ = tmp_ / "model";
  fs::path out_dir_ = tmp_ / "out";
  onnx::ModelProto mlp_;
};

TEST_F(BadInput, FileThatIsNotOnnx) {
  write_bytes(model_dir_ / "notes.onnx", "This is a plain text file, not a protobuf model.\n");
  expect_refused(model_dir_ / "notes.onnx", "notes.onnx' is not a valid ONNX model");
}

TEST_F(BadInput, BinaryFileThatIsNotOnnx) {
  write_bytes(model_dir_ / "image.onnx",
              std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10", 20));
  expect_refused(model_dir_ / "image.onnx", "image.onnx' is not a valid ONNX model");
}

TEST_F(BadInput, EmptyFile) {
  write_bytes(model_dir_ / "empty.onnx", "");
  expect_refused(model_dir_ / "empty.onnx", "empty.onnx' is empty, not an ONNX model");
}

TEST_F(BadInput, MissingFile) {
  expect_refused(model_dir_ / "absent.onnx",
                 "cannot open '" + (model_dir_ / "absent.onnx").string() + "'");
}

TEST_F(BadInput, TruncatedFileFirstHalf) {
  const std::string bytes = read_bytes(source_path("models/mlp.onnx"));
  write_bytes(model_dir_ / "half.onnx", bytes.substr(0, bytes.size() / 2));
  expect_refused(model_dir_ / "half.onnx", "half.onnx' is not a valid ONNX model");
}

TEST_F(BadInput, TruncatedFileAtOtherPoints) {
  const std::string bytes = read_bytes(source_path("models/mlp.onnx"));
  for (size_t keep : {size_t{3}, bytes.size() / 4, bytes.size() * 3 / 4, bytes.size() - 1}) {
    SCOPED_TRACE("first " + std::to_string(keep) + " of " + std::to_string(bytes.size()) +
                 " bytes");
    write_bytes(model_dir_ / "cut.onnx", bytes.substr(0, keep));
    expect_refused(model_dir_ / "cut.onnx", "cut.onnx' is not a valid ONNX model");
  }
}

TEST_F(BadInput, TruncatedAtAFieldBoundary) {
  // Cut right after the graph: protobuf parses the rest, but opset_import is gone.
  onnx::ModelProto no_opsets = mlp_;
  no_opsets.clear_opset_import();
  write_model(no_opsets, "cut.onnx");
  expect_refused(model_dir_ / "cut.onnx",
                 "is not a valid ONNX model (missing ir_version, opset_import or graph)");
}

TEST_F(BadInput, NodeInputWithoutProducer) {
  node(mlp_, "/act/Div")->set_input(0, "no_such_tensor");
  const fs::path model = write_model(mlp_);
  expect_refused(model, "node '/act/Div' (Div): input 'no_such_tensor' has no producer");
}

TEST_F(BadInput, GraphOutputWithoutProducer) {
  mlp_.mutable_graph()->mutable_output(0)->set_name("no_such_output");
  const fs::path model = write_model(mlp_);
  expect_refused(model, "graph output 'no_such_output' is never produced");
}

TEST_F(BadInput, UnknownOperatorDomain) {
  node(mlp_, "/act/Erf")->set_domain("com.example.custom");
  const fs::path model = write_model(mlp_);
  expect_refused(
      model,
      "node '/act/Erf' (com.example.custom.Erf) uses unknown operator domain 'com.example.custom'");
}

// torch 1.13's export of torch.where(mask, x, value) with a Python number: the scalar as a
// Constant of `type` (its bytes given), the Where between the MLP's Erf and its input.
void where_with_a_scalar_branch(onnx::ModelProto& mlp, int type, const std::string& bytes) {
  auto& nodes = *mlp.mutable_graph()->mutable_node();
  int at = 0;
  while (nodes.Get(at).name() != "/act/Erf") ++at;
  onnx::NodeProto erf = nodes.Get(at);
  auto constant = [](const std::string& name, int type, const std::string& bytes) {
    onnx::NodeProto c;
    c.set_op_type("Constant");
    c.set_name(name);
    c.add_output(name);
    auto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(type);
    a->mutable_t()->set_raw_data(bytes);
    return c;
  };
  const bool yes = true;
  onnx::NodeProto where;
  where.set_op_type("Where");
  where.set_name("/masked");
  where.add_input("/mask");
  where.add_input(erf.input(0));
  where.add_input("/value");
  where.add_output("/masked");
  erf.set_input(0, "/masked");
  std::vector<onnx::NodeProto> list(nodes.begin(), nodes.end());
  list[static_cast<size_t>(at)] = erf;
  list.insert(list.begin() + at, {constant("/value", type, bytes),
                                  constant("/mask", onnx::TensorProto::BOOL,
                                           std::string(reinterpret_cast<const char*>(&yes), 1)),
                                  where});
  nodes.Clear();
  for (auto& n : list) *nodes.Add() = n;
}

// torch.where(mask, x, 0.1): a double Constant.
TEST_F(BadInput, WhereWithADoubleScalarBranch) {
  const double value = 0.1;
  where_with_a_scalar_branch(mlp_, onnx::TensorProto::DOUBLE,
                             std::string(reinterpret_cast<const char*>(&value), 8));
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "node '/masked' (Where): its second branch is a double constant beside f32 "
                 "data: torch 1.13 exports a Python float in torch.where so, and computes what "
                 "follows in double; write x.masked_fill(~mask, value) or torch.where(mask, x, "
                 "torch.tensor(value)) instead");
}

// torch.where(mask, x, 0): an int64 Constant, which ONNX's Where cannot take beside floats.
TEST_F(BadInput, WhereWithAnIntegerScalarBranch) {
  const int64_t value = 0;
  where_with_a_scalar_branch(mlp_, onnx::TensorProto::INT64,
                             std::string(reinterpret_cast<const char*>(&value), 8));
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "node '/masked' (Where): its second branch is an int64 constant beside f32 "
                 "data: torch 1.13 exports a Python int in torch.where so, and ONNX's Where "
                 "takes one type for both; write x.masked_fill(~mask, value) or "
                 "torch.where(mask, x, torch.tensor(value, dtype=x.dtype)) instead");
}

// torch 1.13's export of torch.tensor_split: a Loop that fills a sequence begun by a
// SequenceEmpty, whose output torch types as a sequence in the file's value_info.
TEST_F(BadInput, SequenceOfTensors) {
  auto& nodes = *mlp_.mutable_graph()->mutable_node();
  onnx::NodeProto empty;
  empty.set_op_type("SequenceEmpty");
  empty.set_name("/split/SequenceEmpty");
  empty.add_output("/split/SequenceEmpty_output_0");
  std::vector<onnx::NodeProto> list(nodes.begin(), nodes.end());
  list.insert(list.begin(), empty);
  nodes.Clear();
  for (auto& n : list) *nodes.Add() = n;
  auto* info = mlp_.mutable_graph()->add_value_info();
  info->set_name("/split/SequenceEmpty_output_0");
  info->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "value '/split/SequenceEmpty_output_0', output of '/split/SequenceEmpty' "
                 "(SequenceEmpty), has sequence type; ampc supports dense tensor values only "
                 "(torch.onnx.export writes torch.tensor_split, a torch.repeat_interleave along "
                 "an axis it cannot size, and a torch.split or torch.chunk into pieces it cannot "
                 "size, as a sequence; ampc.export and ampc.compile of the module trace them as "
                 "slices and expands)");
}

TEST_F(BadInput, UnknownOperatorDomainThatTheModelImports) {
  node(mlp_, "/act/Erf")->set_domain("com.example.custom");
  auto* opset = mlp_.add_opset_import();
  opset->set_domain("com.example.custom");
  opset->set_version(1);
  const fs::path model = write_model(mlp_);
  expect_refused(
      model,
      "node '/act/Erf' (com.example.custom.Erf) uses unknown operator domain 'com.example.custom'");
}

TEST_F(BadInput, UnknownOperatorInTheOnnxDomain) {
  node(mlp_, "/act/Erf")->set_op_type("Erff");
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "node '/act/Erf' (Erff): no operator 'Erff' in domain 'ai.onnx' at opset 17");
}

TEST_F(BadInput, ExternalDataAtAnAbsolutePath) {
  const fs::path outside = tmp_ / "elsewhere" / "fc1.bin";
  externalise(mlp_, "fc1.weight", outside.string(), outside);
  const fs::path model = write_model(mlp_);
  expect_refused(model, "initializer 'fc1.weight': external data location '" + outside.string() +
                            "' is absolute; it must be relative to the model's folder");
}

TEST_F(BadInput, ExternalDataClimbingOutWithDotDot) {
  // The file exists (next to the model's folder): the refusal is about the path, not a miss.
  externalise(mlp_, "fc1.weight", "../fc1.bin", tmp_ / "fc1.bin");
  const fs::path model = write_model(mlp_);
  expect_refused(
      model,
      "initializer 'fc1.weight': external data location '../fc1.bin' leaves the model's folder");
}

TEST_F(BadInput, ExternalDataClimbingOutFromASubfolder) {
  externalise(mlp_, "fc2.bias", "weights/../../fc2.bin", tmp_ / "fc2.bin");
  fs::create_directories(model_dir_ / "weights");
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "initializer 'fc2.bias': external data location 'weights/../../fc2.bin' leaves "
                 "the model's folder");
}

TEST_F(BadInput, ExternalDataThroughASymlinkOutOfTheFolder) {
  externalise(mlp_, "fc1.weight", "link.bin", tmp_ / "fc1.bin");
  fs::create_symlink(tmp_ / "fc1.bin", model_dir_ / "link.bin");
  const fs::path model = write_model(mlp_);
  expect_refused(model,
                 "initializer 'fc1.weight': external data location 'link.bin' resolves outside the "
                 "model's folder");
}

TEST_F(BadInput, ExternalDataFileMissing) {
  externalise(mlp_, "fc1.weight", "fc1.bin", model_dir_ / "fc1.bin");
  fs::remove(model_dir_ / "fc1.bin");
  const fs::path model = write_model(mlp_);
  expect_refused(model, "initializer 'fc1.weight': cannot open external data 'fc1.bin'");
}

TEST_F(BadInput, ExternalDataFileTooShort) {
  externalise(mlp_, "fc1.weight", "fc1.bin", model_dir_ / "fc1.bin");
  fs::resize_file(model_dir_ / "fc1.bin", 100);
  const fs::path model = write_model(mlp_);
  expect_refused(
      model, "initializer 'fc1.weight': external data 'fc1.bin' is shorter than offset + length");
}

TEST_F(BadInput, InputShapeLeftDynamic) {
  mlp_.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  const fs::path model = write_model(mlp_);
  const std::string message = expect_refused(model, "input 'x' has dynamic dimension 0 ('batch')");
  EXPECT_THAT(message, HasSubstr("--input-shape x=1x64"));

  // Giving the dimension fixes it.
  const RunResult fixed =
      run_ampc({"inspect", model.string(), "--format", "json", "--input-shape", "x=32x64"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_EQ(nlohmann::json::parse(fixed.out)["inputs"][0]["shape"],
            nlohmann::json::parse("[32,64]"));
}

TEST_F(BadInput, InputShapeLeftDynamicWithoutAName) {
  // Dimension 0 of y has neither a value nor a name; x is fixed on the command line.
  mlp_.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  mlp_.mutable_graph()
      ->mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->Clear();
  const fs::path model = write_model(mlp_);
  expect_refused(model, "input 'y' has dynamic dimension 0; fix it with --input-shape y=1",
                 {"--input-shape", "x=32x64"});
}

TEST_F(BadInput, InputWithoutShape) {
  mlp_.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  const fs::path model = write_model(mlp_);
  expect_refused(model, "input 'y' has no shape (unknown rank)");
}

TEST_F(BadInput, InputShapeForAnUnknownInput) {
  const fs::path model = write_model(mlp_);
  expect_refused(model, "--input-shape names 'z', which is not a graph input",
                 {"--input-shape", "z=4"});
}

TEST_F(BadInput, InputShapeOfTheWrongRank) {
  const fs::path model = write_model(mlp_);
  expect_refused(model, "input 'x' has rank 2, not 3", {"--input-shape", "x=32x64x1"});
}

TEST_F(BadInput, InputShapeThatIsNotANumber) {
  const fs::path model = write_model(mlp_);
  expect_refused(model, "'3a' is not a dimension", {"--input-shape", "x=32x3a"});
}

// The positive counterpart: initializers in files inside the model's folder (one file with
// two tensors at offsets, one in a subfolder) load to the same IR as the original.
TEST_F(BadInput, ExternalDataInsideTheFolderLoads) {
  externalise(mlp_, "fc1.weight", "weights.bin", model_dir_ / "weights.bin", 0);
  externalise(mlp_, "fc2.weight", "weights.bin", model_dir_ / "weights.bin", 32768);
  externalise(mlp_, "ln1.bias", "sub/ln1_bias.bin", model_dir_ / "sub" / "ln1_bias.bin");
  const fs::path model = write_model(mlp_);

  const RunResult r = run_ampc(
      {"inspect", model.string(), "--format", "json", "--dot", (out_dir_ / "g.dot").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["initializers"]["count"], 6);
  EXPECT_EQ(j["initializers"]["bytes"], 39464);
  EXPECT_EQ(list_dir(out_dir_), std::vector<std::string>{"g.dot"});

  const std::string with_external = ir::to_text(*onnx_io::load_model(model.string()));
  const std::string original =
      ir::to_text(*onnx_io::load_model(source_path("models/mlp.onnx").string()));
  EXPECT_EQ(with_external, original);
}

// A failure after the model loaded (Graphviz cannot write the SVG) still leaves no SVG or
// temporary file.
// A training-mode BatchNorm over one value per channel (batch 1, no spatial size) has no
// unbiased variance: PyTorch refuses such a batch, and so does PyTorch's running-variance
// update here, naming the node and the way out; ONNX's biased update compiles.
TEST_F(BadInput, BatchNormOfOneValuePerChannel) {
  namespace ob = test::onnx_build;
  onnx::ModelProto m = ob::model("bn1");
  m.set_producer_name("pytorch");
  onnx::GraphProto* g = m.mutable_graph();
  ob::add_float_io(g, "x", {1, 4});
  ob::add_float_initializer(g, "bn.weight", {4}, {1, 1, 1, 1});
  ob::add_float_initializer(g, "bn.bias", {4}, {0, 0, 0, 0});
  ob::add_float_initializer(g, "bn.running_mean", {4}, {0, 0, 0, 0});
  ob::add_float_initializer(g, "bn.running_var", {4}, {1, 1, 1, 1});
  onnx::NodeProto* bn =
      ob::add_node(g, "BatchNormalization",
                   {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, "y");
  bn->set_name("/bn/BatchNormalization");
  bn->add_output("new_mean");
  bn->add_output("new_var");
  ob::add_int(bn, "training_mode", 1);
  ob::add_int(ob::add_node(g, "ReduceSum", {"y"}, "loss"), "keepdims", 0);
  ob::add_float_io(g, "loss", {}, /*output=*/true);
  const fs::path model = write_model(m, "bn1.onnx");
  const std::string plan = (out_dir_ / "bn1.plan").string();
  const std::string err =
      expect_user_error({"compile", model.string(), "--train", "--target", "cpu", "-o", plan});
  EXPECT_THAT(err, HasSubstr("node '/bn/BatchNormalization' (BatchNormalization): "));
  EXPECT_THAT(err, HasSubstr("one value per channel (input f32[1,4]) has no unbiased variance"));
  EXPECT_FALSE(fs::exists(plan));
  expect_success({"compile", model.string(), "--train", "--target", "cpu",
                  "--batchnorm-running-var", "biased", "-o", plan});
}

// nn.Embedding(padding_idx=1) as torch.onnx.export writes it (a plain Gather of a table whose
// row 1 is zeros): compiled, with one warning line on stderr naming the lookup and the row
// (passes/lost_padding_rows.h), and none with the table frozen.
TEST_F(BadInput, PlainExportOfAPaddingRowCompilesWithAWarning) {
  namespace ob = test::onnx_build;
  onnx::ModelProto m = ob::model("padding_row");
  m.set_producer_name("pytorch");
  onnx::GraphProto* g = m.mutable_graph();
  ob::add_float_io(g, "tokens", {2, 3});
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  ob::add_float_initializer(g, "embed.weight", {3, 2}, {0.5f, -1, 0, 0, 2, 0.25f});
  ob::add_float_initializer(g, "scale", {2}, {1, 2});
  ob::add_node(g, "Gather", {"embed.weight", "tokens"}, "e")->set_name("/embed/Gather");
  ob::add_node(g, "Mul", {"e", "scale"}, "h");
  ob::add_int(ob::add_node(g, "ReduceSum", {"h"}, "loss"), "keepdims", 0);
  ob::add_float_io(g, "loss", {}, /*output=*/true);
  const fs::path model = write_model(m, "padding_row.onnx");
  const std::string plan = (out_dir_ / "padding_row.plan").string();
  RunResult r = run_ampc({"compile", model.string(), "--train", "--target", "cpu", "-o", plan});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.rfind("ampc: warning: node '/embed/Gather' (Gather): row 1 of 'embed.weight' "
                        "is all zeros, as nn.Embedding(padding_idx=1) starts its padding row",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(fs::exists(plan));
  r = run_ampc({"compile", model.string(), "--train", "--target", "cpu", "--freeze", "embed.weight",
                "-o", plan});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// x[mask] whose selected elements reach an op other than elementwise ones, a sum, a mean or a
// cross-entropy (here a softmax over them) keeps its run-time length: training refuses it in one
// line naming the NonZero, what trains, and how to mask the loss instead.
TEST_F(BadInput, BooleanMaskSelectionOutsideALoss) {
  namespace ob = test::onnx_build;
  onnx::ModelProto m = ob::model("selection");
  onnx::GraphProto* g = m.mutable_graph();
  ob::add_float_io(g, "x", {4, 3});
  ob::add_float_initializer(g, "w", {3}, {0.5f, -1.0f, 2.0f});
  ob::add_float_initializer(g, "zero", {}, {0.0f});
  ob::add_node(g, "Mul", {"x", "w"}, "h");
  ob::add_node(g, "Greater", {"h", "zero"}, "positive");
  ob::add_node(g, "NonZero", {"positive"}, "where");
  ob::add_ints(ob::add_node(g, "Transpose", {"where"}, "indices"), "perm", {1, 0});
  ob::add_node(g, "GatherND", {"h", "indices"}, "selected");
  ob::add_int(ob::add_node(g, "Softmax", {"selected"}, "shares"), "axis", 0);
  ob::add_node(g, "Mul", {"shares", "selected"}, "weighted");
  ob::add_int(ob::add_node(g, "ReduceSum", {"weighted"}, "loss"), "keepdims", 0);
  ob::add_float_io(g, "loss", {}, /*output=*/true);
  const fs::path model = write_model(m, "selection.onnx");
  const std::string plan = (out_dir_ / "selection.plan").string();
  const std::string err =
      expect_user_error({"compile", model.string(), "--train", "--target", "cpu", "-o", plan});
  EXPECT_THAT(err, HasSubstr("node '/where' (NonZero)"));
  EXPECT_THAT(err, HasSubstr("boolean-mask selection (x[mask], torch.masked_select) trains only "
                             "where the selected elements reach a sum, a mean or a "
                             "cross-entropy / NLL loss"));
  EXPECT_THAT(err, HasSubstr("(loss * mask).sum() / mask.sum()"));
  EXPECT_FALSE(fs::exists(plan));
}

TEST_F(BadInput, SvgIntoAMissingFolderLeavesNothing) {
  const RunResult r = run_ampc({"inspect", source_path("models/mlp.onnx").string(), "--svg",
                                (out_dir_ / "no_such_dir" / "g.svg").string()});
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ampc: error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(list_dir(out_dir_), ::testing::IsEmpty());
}

// When --svg fails, the --dot file of the same (failed) command is not left behind either.
TEST_F(BadInput, FailedSvgLeavesNoDotFile) {
  const RunResult r = run_ampc({"inspect", source_path("models/mlp.onnx").string(), "--dot",
                                (out_dir_ / "g.dot").string(), "--svg",
                                (out_dir_ / "no_such_dir" / "g.svg").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ampc: error: "));
  EXPECT_THAT(list_dir(out_dir_), ::testing::IsEmpty());
}

// When the --dot file cannot be written, the --svg file of the same command is removed.
TEST_F(BadInput, FailedDotLeavesNoSvgFile) {
  const RunResult r = run_ampc({"inspect", source_path("models/mlp.onnx").string(), "--dot",
                                (out_dir_ / "no_such_dir" / "g.dot").string(), "--svg",
                                (out_dir_ / "g.svg").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ampc: error: cannot write '"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(list_dir(out_dir_), ::testing::IsEmpty());
}

}  // namespace
}  // namespace ampc::testing
