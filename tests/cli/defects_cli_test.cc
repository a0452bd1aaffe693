// Defects found by trying ampc as a new user would (issue 19), each checked from the command
// line: training options without --train, sizes past what a process can address, NaN
// printed as "nan", every held-out sample evaluated (PyTorch oracle), plans that do not fit
// the memory available refused before work starts.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "runtime/io/npy.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

std::string mlp() {
  return source_path("models/mlp.onnx").string();
}
std::string digits() {
  return source_path("models/data/digits.npz").string();
}

// y = OP(x), x and y f32 of shape `dims`.
onnx::ModelProto unary_model(const std::string& op, const std::vector<int64_t>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(op);
  auto* node = g->add_node();
  node->set_op_type(op);
  node->add_input("x");
  node->add_output("y");
  for (auto [v, name] : {std::pair{g->add_input(), "x"}, std::pair{g->add_output(), "y"}}) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  return m;
}

TEST(Defects, CompileRefusesTrainingOptionsWithoutTrain) {
  TempDir dir;
  const std::string err = expect_user_error(
      {"compile", mlp(), "--optimizer", "sgd", "--lr", "0.05", "-o", (dir / "p.plan").string()});
  EXPECT_NE(err.find("--optimizer, --lr: training options, but no --train"), std::string::npos)
      << err;
  const std::string scale =
      expect_user_error({"compile", mlp(), "--precision", "fp16", "--loss-scale", "dynamic",
                         "--init-scale", "1024", "-o", (dir / "p.plan").string()});
  EXPECT_NE(scale.find("--loss-scale, --init-scale: training options"), std::string::npos) << scale;
  EXPECT_TRUE(list_dir(dir.path()).empty());
  // The precision options alone make a forward plan, as before.
  expect_success({"compile", mlp(), "--precision", "fp16", "-o", (dir / "f.plan").string()});
}

TEST(Defects, InputOfTwoToTheEightyElementsIsRefused) {
  TempDir dir;
  write_proto(unary_model("Relu", {2, 3}), dir / "relu.onnx");
  const std::string model = (dir / "relu.onnx").string();
  const std::string huge = "x=1099511627776x1099511627776";  // [2^40, 2^40]
  for (const std::string cmd : {"compile", "inspect"}) {
    std::vector<std::string> args{cmd, model, "--input-shape", huge};
    if (cmd == "compile") args.insert(args.end(), {"-o", (dir / "p.plan").string()});
    const std::string err = expect_user_error(args);
    EXPECT_NE(err.find("graph input 'x': shape [1099511627776,1099511627776] has more than 2^63 "
                       "elements"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("more than the 256 TiB (2^48 bytes) a process can address"),
              std::string::npos)
        << err;
  }
  // A count that fits 64 bits but not an address space: 2^47 floats are 2^49 bytes.
  const std::string big = expect_user_error(
      {"compile", model, "--input-shape", "x=2199023255552x64", "-o", (dir / "p.plan").string()});
  EXPECT_NE(big.find("has 140737488355328 elements of 4 bytes, more than the 256 TiB"),
            std::string::npos)
      << big;
  EXPECT_FALSE(std::filesystem::exists(dir / "p.plan"));
}

TEST(Defects, NanPrintsAsNanNotMinusNan) {
  TempDir dir;
  // y = Sqrt(x): sqrt(-1) is the NaN with the sign bit set that glibc prints as "-nan".
  const onnx::ModelProto m = unary_model("Sqrt", {3});
  write_proto(m, dir / "sqrt.onnx");
  rt::Tensor x(DType::kFloat32, {3});
  const float values[] = {-1.0f, 4.0f, -0.0f};
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = values[i];
  rt::io::write_npy(x, (dir / "x.npy").string());
  const std::string out = expect_success(
      {"run", (dir / "sqrt.onnx").string(), "--input", "x=" + (dir / "x.npy").string()});
  EXPECT_NE(out.find("y: f32[3] = [nan, 2, -0]"), std::string::npos) << out;
  EXPECT_EQ(out.find("-nan"), std::string::npos) << out;
}

// 1797 digits, 20% held out: 359 samples, 11 batches of 32 and 7 more. Every one is
// evaluated, and the loss and accuracy are PyTorch's (float64) over all 359.
TEST(Defects, HoldoutEvaluatesEverySampleAgainstPyTorch) {
  TempDir dir;
  const std::string ckpt = (dir / "ckpt.onnx").string();
  const std::string out =
      expect_success({"train", mlp(), "--data", digits(), "--holdout", "0.2", "--steps", "30",
                      "--optimizer", "adam", "--lr", "1e-3", "--checkpoint", ckpt});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex("held-out: (\\d+) samples: loss ([0-9.]+), accuracy ([0-9.]+)%")))
      << out;
  EXPECT_EQ(std::stoi(m[1]), 359);
  EXPECT_EQ(out.find("not evaluated"), std::string::npos) << out;

  const std::string cmd = "/usr/bin/python3 " +
                          source_path("tests/cli/heldout_oracle.py").string() + " " + ckpt + " " +
                          digits() + " 0.2 > " + (dir / "oracle.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::istringstream oracle(read_bytes(dir / "oracle.txt"));
  int held = 0;
  double loss = 0, accuracy = 0;
  oracle >> held >> loss >> accuracy;
  EXPECT_EQ(held, 359);
  // Printed with 4 decimals (loss) and 2 (accuracy in %); the model runs in fp32.
  EXPECT_NEAR(std::stod(m[2]), loss, 1e-4 + 1e-4 * loss);
  EXPECT_NEAR(std::stod(m[3]), 100 * accuracy, 0.006);
}

TEST(Defects, PlanLargerThanAvailableMemoryIsRefusedBeforeTraining) {
  TempDir dir;
  ::setenv("AMPC_AVAILABLE_MEMORY", "64KiB", 1);
  const std::string err = expect_user_error(
      {"train", mlp(), "--data", digits(), "--steps", "2", "--log", (dir / "log.jsonl").string()});
  ::unsetenv("AMPC_AVAILABLE_MEMORY");
  EXPECT_NE(err.find("the plan needs "), std::string::npos) << err;
  EXPECT_NE(err.find("(arena "), std::string::npos) << err;
  EXPECT_NE(err.find("but only 64.00 KiB"), std::string::npos) << err;
  EXPECT_NE(err.find("is available on the CPU (AMPC_AVAILABLE_MEMORY)"), std::string::npos) << err;
  EXPECT_NE(err.find("`ampc inspect " + mlp() + " --memory --device-memory "), std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(dir / "log.jsonl"));  // nothing started
  // With the memory the machine has, the same run trains.
  expect_success({"train", mlp(), "--data", digits(), "--steps", "2"});
}

}  // namespace
}  // namespace ampc::testing
