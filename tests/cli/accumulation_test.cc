// Gradient accumulation end to end (`--accum-steps N`):
// - Three SGD-momentum steps accumulated over 4 micro-batches of 4 samples equal, in fp32,
//   three steps with batches of 16 on the same samples: every parameter and momentum buffer
//   within 1e-6 relative; the log's loss is the mean of the micro-batch losses.
// - A checkpoint between optimizer steps and --resume give the same bits as one run (the
//   accumulators and the micro-step counter are plan state), from a compiled plan.
// - --accum-steps 1 compiles the same plan as no option.
// - Several losses with accumulation: the log's loss is their sum, `losses` each.
// - fp16 with dynamic scaling, an overflow in one micro-batch: the whole optimizer step is
//   skipped (parameters keep their bits), the scale backs off once, training goes on;
//   --find-nonfinite names the micro-batch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/io/checkpoint.h"
#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {

// mlp_b4.onnx / mlp_b16.onnx: loss = mean((tanh(x W1) W2 - t)^2) for batches of 4 and 16;
// two.onnx: mlp_b4 with a second loss output reg = mean(tanh(x W1)^2);
// lin.onnx: loss = mean((x W - t)^2), batch 4; data.npz: 64 samples; overflow.npz: samples
// 12..15 (with --accum-steps 2: the second micro-batch of step 2) hold x = 1e5, beyond fp16.
constexpr const char* kMakeModels = R"(
import sys, os, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
rng = np.random.default_rng(7)
w1 = (rng.standard_normal((6, 8)) * 0.5).astype(np.float32)
w2 = (rng.standard_normal((8, 3)) * 0.5).astype(np.float32)
def save(nodes, batch, inits, name, nx, nt):
    g = h.make_graph(nodes, name,
                     [h.make_tensor_value_info("x", T.FLOAT, [batch, nx]),
                      h.make_tensor_value_info("t", T.FLOAT, [batch, nt])],
                     [h.make_tensor_value_info("loss", T.FLOAT, [])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, name + ".onnx"))
mse = [h.make_node("Sub", ["y", "t"], ["diff"], name="sub"),
       h.make_node("Mul", ["diff", "diff"], ["sq"], name="sq"),
       h.make_node("ReduceMean", ["sq"], ["loss"], name="mean", keepdims=0)]
mlp = [h.make_node("MatMul", ["x", "W1"], ["z"], name="mm1"),
       h.make_node("Tanh", ["z"], ["hid"], name="tanh"),
       h.make_node("MatMul", ["hid", "W2"], ["y"], name="mm2")] + mse
for b in (4, 16):
    save(mlp, b, [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")], "mlp_b%d" % b, 6, 3)
save([h.make_node("MatMul", ["x", "W"], ["y"], name="mm")] + mse, 4,
     [nh.from_array((rng.standard_normal((4, 3)) * 0.5).astype(np.float32), "W")], "lin", 4, 3)
reg = [h.make_node("Mul", ["hid", "hid"], ["hsq"], name="hsq"),
       h.make_node("ReduceMean", ["hsq"], ["reg"], name="mean_reg", keepdims=0)]
g = h.make_graph(mlp + reg, "two_losses",
                 [h.make_tensor_value_info("x", T.FLOAT, [4, 6]),
                  h.make_tensor_value_info("t", T.FLOAT, [4, 3])],
                 [h.make_tensor_value_info(o, T.FLOAT, []) for o in ("loss", "reg")],
                 [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "two.onnx"))
x = rng.standard_normal((64, 6)).astype(np.float32)
np.savez(os.path.join(d, "data.npz"), x=x, t=rng.standard_normal((64, 3)).astype(np.float32))
x = rng.standard_normal((64, 4)).astype(np.float32)
x[12:16] = 1e5
np.savez(os.path.join(d, "overflow.npz"), x=x, t=rng.standard_normal((64, 3)).astype(np.float32))
)";

// max |a - b| / max |b| over the elements of two fp32 tensors.
double relative_difference(const rt::Tensor& a, const rt::Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    norm = std::max(norm, std::abs(double(b.data<float>()[i])));
  }
  return diff / norm;
}

class Accumulation : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto script = dir_ / "make.py";
    std::ofstream(script) << kMakeModels;
    const std::string cmd =
        "/usr/bin/python3 '" + script.string() + "' '" + dir_.path().string() + "'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  // `ampc train MODEL --data DATA` with SGD momentum and `extra`; the checkpoint goes to
  // dir_/<tag>.onnx, the log to dir_/<tag>.jsonl.
  std::string train(const std::string& tag, const std::string& model, const std::string& data,
                    const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "train",        model.find('/') == std::string::npos ? (dir_ / model).string() : model,
        "--data",       (dir_ / data).string(),
        "--log",        (dir_ / (tag + ".jsonl")).string(),
        "--checkpoint", (dir_ / (tag + ".onnx")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return expect_success(args);
  }

  std::map<std::string, rt::Tensor> state(const std::string& tag) {
    return rt::io::read_checkpoint((dir_ / (tag + ".onnx")).string()).initializers;
  }

  TempDir dir_;
  const std::vector<std::string> sgd_ = {"--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"};
};

TEST_F(Accumulation, FourMicroBatchesEqualOneBatchFourTimesLarger) {
  auto opts = sgd_;
  opts.insert(opts.end(), {"--steps", "3"});
  train("big", "mlp_b16.onnx", "data.npz", opts);
  opts.insert(opts.end(), {"--accum-steps", "4"});
  train("accum", "mlp_b4.onnx", "data.npz", opts);
  const auto big = state("big"), accum = state("accum");
  for (const char* name : {"W1", "W2", "W1.momentum_buffer", "W2.momentum_buffer"}) {
    ASSERT_TRUE(big.count(name) && accum.count(name)) << name;
    EXPECT_LE(relative_difference(accum.at(name), big.at(name)), 1e-6) << name;
  }
  // Between optimizer steps the accumulators are zero and the counter is back at 0.
  for (const char* name : {"W1.grad_accum", "W2.grad_accum"}) {
    const rt::Tensor& t = accum.at(name);
    EXPECT_TRUE(std::all_of(t.data<float>(), t.data<float>() + t.numel(), [](float v) {
      return v == 0;
    })) << name;
  }
  EXPECT_EQ(accum.at("amp.micro_step").data<int64_t>()[0], 0);
  // The log: one line per optimizer step, the mean of the micro-batch losses (the mean loss
  // of the 16 samples).
  const auto big_log = read_log(dir_ / "big.jsonl"), accum_log = read_log(dir_ / "accum.jsonl");
  ASSERT_EQ(accum_log.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(accum_log[i]["step"], i + 1);
    EXPECT_NEAR(double(accum_log[i]["loss"]), double(big_log[i]["loss"]),
                1e-5 * double(big_log[i]["loss"]));
  }
}

TEST_F(Accumulation, ResumeIsBitExactAndOneStepAddsNothing) {
  const auto plan = (dir_ / "accum.plan").string();
  std::vector<std::string> compile = {
      "compile", (dir_ / "mlp_b4.onnx").string(), "--train", "--accum-steps", "3", "-o", plan};
  compile.insert(compile.end(), sgd_.begin(), sgd_.end());
  expect_success(compile);
  train("full", plan, "data.npz", {"--steps", "3"});
  train("half", plan, "data.npz", {"--steps", "2"});
  train("resumed", plan, "data.npz", {"--steps", "1", "--resume", (dir_ / "half.onnx").string()});
  const auto full = state("full"), resumed = state("resumed");
  ASSERT_EQ(full.size(), resumed.size());
  for (const auto& [name, t] : full) EXPECT_EQ(bytes_of(t), bytes_of(resumed.at(name))) << name;
  ASSERT_EQ(read_log(dir_ / "resumed.jsonl").at(0)["step"], 3);

  // --accum-steps 1 is the plan without accumulation, byte for byte.
  const auto one = (dir_ / "one.plan").string(), none = (dir_ / "none.plan").string();
  expect_success({"compile", (dir_ / "mlp_b4.onnx").string(), "--train", "-o", none});
  expect_success(
      {"compile", (dir_ / "mlp_b4.onnx").string(), "--train", "--accum-steps", "1", "-o", one});
  EXPECT_EQ(read_bytes(one), read_bytes(none));
}

TEST_F(Accumulation, OverflowInOneMicroBatchSkipsTheWholeStepAndBacksOffOnce) {
  auto opts = sgd_;
  opts.insert(opts.end(), {"--precision", "fp16", "--accum-steps", "2"});
  auto steps = [&](const char* n) {
    auto o = opts;
    o.insert(o.end(), {"--steps", n});
    return o;
  };
  train("one", "lin.onnx", "overflow.npz", steps("1"));
  train("two", "lin.onnx", "overflow.npz", steps("2"));
  const std::string out = train("four", "lin.onnx", "overflow.npz", steps("4"));
  EXPECT_THAT(out, ::testing::HasSubstr("1 of 4 steps skipped"));
  const auto log = read_log(dir_ / "four.jsonl");
  ASSERT_EQ(log.size(), 4u);
  const std::vector<bool> skipped = {false, true, false, false};
  const std::vector<double> scale = {65536, 65536, 32768, 32768};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(log[i]["skipped"], skipped[i]) << "step " << i + 1;
    EXPECT_EQ(double(log[i]["scale"]), scale[i]) << "step " << i + 1;
  }
  // The skipped step left the parameter and its momentum as they were; the scaler backed
  // off (torch: scale * 0.5, growth tracker 0).
  const auto one = state("one"), two = state("two");
  for (const char* name : {"W", "W.momentum_buffer"})
    EXPECT_EQ(bytes_of(one.at(name)), bytes_of(two.at(name))) << name;
  EXPECT_NE(bytes_of(two.at("W")), bytes_of(state("four").at("W")));
  EXPECT_EQ(two.at("amp.scale").data<float>()[0], 32768.0f);
  EXPECT_EQ(one.at("amp.growth_tracker").data<int32_t>()[0], 1);
  EXPECT_EQ(two.at("amp.growth_tracker").data<int32_t>()[0], 0);

  // --find-nonfinite names the micro-batch that overflowed.
  std::vector<std::string> args = {"train", (dir_ / "lin.onnx").string(), "--data",
                                   (dir_ / "overflow.npz").string(), "--find-nonfinite"};
  const auto o = steps("2");
  args.insert(args.end(), o.begin(), o.end());
  const RunResult r = run_ampc(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("step 2 skipped: micro-batch 2 of 2: "));
}

TEST_F(Accumulation, SeveralLossesLogTheirSumAndEach) {
  auto opts = sgd_;
  opts.insert(opts.end(),
              {"--steps", "2", "--accum-steps", "2", "--loss", "loss", "--loss", "reg"});
  train("two_accum", "two.onnx", "data.npz", opts);
  const auto log = read_log(dir_ / "two_accum.jsonl");
  ASSERT_EQ(log.size(), 2u);
  for (const auto& j : log) {
    ASSERT_TRUE(j.contains("losses")) << j.dump();
    const double a = j["losses"]["loss"], b = j["losses"]["reg"];
    EXPECT_GT(b, 0);
    EXPECT_NEAR(double(j["loss"]), a + b, 1e-6 * (a + b));
  }
  // One loss, not the first output: the log reports that one, without `losses`.
  train("both", "two.onnx", "data.npz", {"--steps", "1", "--loss", "loss", "--loss", "reg"});
  train("one", "two.onnx", "data.npz", {"--steps", "1", "--loss", "reg"});
  const auto one = read_log(dir_ / "one.jsonl"), both = read_log(dir_ / "both.jsonl");
  EXPECT_FALSE(one.at(0).contains("losses"));
  EXPECT_EQ(double(one.at(0)["loss"]), double(both.at(0)["losses"]["reg"]));
}

}  // namespace
}  // namespace ampc::testing
