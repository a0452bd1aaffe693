// `ampc compile` and `ampc run`, run as separate processes on models/mlp.onnx with the first
// 32 rows of models/data/digits.npz (extracted with Debian's Python at test time): a compiled
// plan runs with .npy inputs and writes .npy outputs; the .onnx model runs directly with .pb
// inputs and writes .pb outputs (the format of the first input unless --format says
// otherwise). Every failure (an op without a CPU kernel, a missing or misshapen input, a
// corrupted plan, ...) exits 1 with one line on stderr and leaves no output file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>

#include "runtime/io/npy.h"
#include "runtime/io/tensor_pb.h"
#include "runtime/plan/plan_file.h"
#include "tests/cli/cli_util.h"
#include "tests/support/mlp_variants.h"

namespace ampc::testing {
namespace {
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// The mean cross-entropy of mlp.onnx on digits rows 0..31, as PyTorch computes it in float64
// (tests/oracle/torch_forward_oracle.py prints it; the oracle test checks all three models).
constexpr double kMlpLoss = 2.369934265624175;

// Runs a Python program with Debian's Python (numpy as np, the data folder as `d`, the source
// tree as `src`); fails the test unless it exits 0.
void python(const fs::path& dir, const std::string& program) {
  const fs::path script = dir / "script.py";
  {
    std::ofstream out(script);
    out << "import sys, os\nimport numpy as np\nd, src = sys.argv[1], sys.argv[2]\n" << program;
  }
  const std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + dir.string() + "' '" +
                          std::string(AMPC_SOURCE_DIR) + "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "python failed:\n" << program;
  fs::remove(script);
}

float scalar_of(const rt::Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.rank(), 0) << t.type_str();
  return t.numel() == 1 ? t.data<float>()[0] : NAN;
}

class CompileRun : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(data_);
    python(data_, R"(
z = np.load(os.path.join(src, 'models', 'data', 'digits.npz'))
np.save(os.path.join(d, 'x.npy'), z['x'][:32])
np.save(os.path.join(d, 'y.npy'), z['y'][:32])
np.save(os.path.join(d, 'x16.npy'), z['x'][:16])
np.save(os.path.join(d, 'x_f64.npy'), z['x'][:32].astype(np.float64))
np.save(os.path.join(d, 'y_i32.npy'), z['y'][:32].astype(np.int32))
)");
  }

  // Runs ampc, expects success, returns stdout.
  std::string ok(const std::vector<std::string>& args) {
    const RunResult r = run_ampc(args);
    EXPECT_EQ(r.term_signal, 0) << "crashed";
    EXPECT_EQ(r.exit_code, 0) << "stderr:\n" << r.err;
    EXPECT_EQ(r.err, "");
    return r.out;
  }

  // Runs ampc, expects exit 1 with exactly one line "ampc: error: ..." holding every
  // fragment, nothing on stdout, and no output folder or file. Returns the line.
  std::string refused(const std::vector<std::string>& args,
                      const std::vector<std::string>& fragments) {
    std::string shown = "ampc";
    for (const auto& a : args) shown += " " + a;
    SCOPED_TRACE(shown);
    const auto before = list_dir(tmp_.path());
    const RunResult r = run_ampc(args);
    EXPECT_EQ(r.term_signal, 0) << "crashed";
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr:\n" << r.err;
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << "stderr:\n" << r.err;
    EXPECT_THAT(r.err, StartsWith("ampc: error: "));
    for (const auto& f : fragments) EXPECT_THAT(r.err, HasSubstr(f));
    EXPECT_EQ(r.out, "") << "partial output on stdout";
    EXPECT_FALSE(fs::exists(out_))
        << "output folder created: " << ::testing::PrintToString(list_dir(out_));
    EXPECT_EQ(list_dir(tmp_.path()), before) << "files appeared or vanished";
    EXPECT_EQ(list_dir(data_), data_files_) << "files appeared beside the inputs";
    return r.err;
  }

  std::string in(const std::string& name, const std::string& file) {
    return name + "=" + (data_ / file).string();
  }

  // Compiles mlp.onnx to tmp/mlp.plan.
  fs::path compile_mlp() {
    const fs::path plan = tmp_ / "mlp.plan";
    const std::string out =
        ok({"compile", source_path("models/mlp.onnx").string(), "-o", plan.string()});
    EXPECT_THAT(out, StartsWith("wrote " + plan.string() + ": "));
    return plan;
  }

  void capture_data_files() { data_files_ = list_dir(data_); }

  TempDir tmp_;
  fs::path data_ = tmp_ / "data";
  fs::path out_ = tmp_ / "out";
  std::vector<std::string> data_files_;
};

TEST_F(CompileRun, CompilesThePlanAndRunsItWithNpyInputs) {
  const fs::path plan = compile_mlp();
  EXPECT_TRUE(plan::looks_like_plan(plan.string()));
  EXPECT_THAT(list_dir(tmp_.path()), ElementsAre("data", "mlp.plan")) << "temporary files left";
  const plan::Plan p = plan::load_plan(plan.string());
  ASSERT_EQ(p.inputs_size(), 2);
  EXPECT_EQ(p.inputs(0).name(), "x");
  EXPECT_EQ(p.inputs(1).name(), "y");
  ASSERT_EQ(p.outputs_size(), 1);
  EXPECT_EQ(p.outputs(0).name(), "loss");
  EXPECT_GT(p.steps_size(), 0);

  const std::string out = ok({"run", plan.string(), "--input", in("x", "x.npy"), "--input",
                              in("y", "y.npy"), "--output-dir", out_.string()});
  EXPECT_THAT(out, StartsWith("loss: f32[] = [2.3699"));
  ASSERT_THAT(list_dir(out_), ElementsAre("loss.npy"));
  const float loss = scalar_of(rt::io::read_npy((out_ / "loss.npy").string()));
  EXPECT_NEAR(loss, kMlpLoss, 1e-5 * kMlpLoss);

  // Without --output-dir only the summary is printed; with --format pb the output is .pb.
  EXPECT_EQ(ok({"run", plan.string(), "--input", in("x", "x.npy"), "--input", in("y", "y.npy")}),
            out);
  fs::remove_all(out_);
  ok({"run", plan.string(), "--input", in("y", "y.npy"), "--input", in("x", "x.npy"),
      "--output-dir", out_.string(), "--format", "pb"});
  ASSERT_THAT(list_dir(out_), ElementsAre("loss.pb"));
  std::string name;
  EXPECT_EQ(scalar_of(rt::io::read_tensor_pb((out_ / "loss.pb").string(), &name)), loss);
  EXPECT_EQ(name, "loss");
}

TEST_F(CompileRun, RunsTheOnnxModelWithPbInputsWritingPb) {
  python(data_, R"(
from onnx import numpy_helper
for name in ['x', 'y']:
    t = numpy_helper.from_array(np.load(os.path.join(d, name + '.npy')), name)
    open(os.path.join(d, name + '.pb'), 'wb').write(t.SerializeToString())
)");
  const std::string model = source_path("models/mlp.onnx").string();
  ok({"run", model, "--input", in("x", "x.pb"), "--input", in("y", "y.pb"), "--output-dir",
      out_.string()});
  ASSERT_THAT(list_dir(out_), ElementsAre("loss.pb"));

  // Parse the file with ONNX's own protobuf classes, not ampc's reader.
  onnx::TensorProto proto;
  ASSERT_TRUE(proto.ParseFromString(read_bytes(out_ / "loss.pb")));
  EXPECT_EQ(proto.name(), "loss");
  EXPECT_EQ(proto.data_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(proto.dims_size(), 0);
  float loss = NAN;
  if (proto.has_raw_data()) {
    ASSERT_EQ(proto.raw_data().size(), sizeof(float));
    std::memcpy(&loss, proto.raw_data().data(), sizeof loss);
  } else {
    ASSERT_EQ(proto.float_data_size(), 1);
    loss = proto.float_data(0);
  }
  EXPECT_NEAR(loss, kMlpLoss, 1e-5 * kMlpLoss);

  // The same model from .npy inputs, and from the compiled plan: the same bits.
  fs::remove_all(out_);
  ok({"run", model, "--input", in("x", "x.npy"), "--input", in("y", "y.pb"), "--output-dir",
      out_.string()});
  ASSERT_THAT(list_dir(out_), ElementsAre("loss.npy"));  // the first input's format
  EXPECT_EQ(scalar_of(rt::io::read_npy((out_ / "loss.npy").string())), loss);
  fs::remove_all(out_);
  const fs::path plan = compile_mlp();
  ok({"run", plan.string(), "--input", in("y", "y.pb"), "--input", in("x", "x.npy"), "--output-dir",
      out_.string(), "--format", "npy"});
  ASSERT_THAT(list_dir(out_), ElementsAre("loss.npy"));
  EXPECT_EQ(scalar_of(rt::io::read_npy((out_ / "loss.npy").string())), loss);
}

// A model whose second node is an op the CPU backend has no kernel for (Det).
onnx::ModelProto det_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("compile_run_test");
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("det");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "X", {2, 3, 3});
  value(g->add_output(), "Y", {2});
  auto* relu = g->add_node();
  relu->set_name("first_relu");
  relu->set_op_type("Relu");
  relu->add_input("X");
  relu->add_output("R");
  auto* det = g->add_node();
  det->set_name("the_det_node");
  det->set_op_type("Det");
  det->add_input("R");
  det->add_output("Y");
  return m;
}

TEST_F(CompileRun, OpWithoutCpuKernelFailsNamingOpAndNode) {
  const fs::path model = tmp_ / "det.onnx";
  write_proto(det_model(), model);
  rt::Tensor x(DType::kFloat32, {2, 3, 3});
  for (int i = 0; i < 18; ++i) x.data<float>()[i] = static_cast<float>(i % 4);
  rt::io::write_npy(x, (data_ / "x3.npy").string());
  capture_data_files();

  refused({"run", model.string(), "--input", in("X", "x3.npy"), "--output-dir", out_.string()},
          {"the_det_node", "Det"});

  // Compiling is backend-neutral; running the plan is refused the same way.
  const fs::path plan = tmp_ / "det.plan";
  const RunResult r = run_ampc({"compile", model.string(), "-o", plan.string()});
  if (r.exit_code == 0) {
    EXPECT_EQ(plan::load_plan(plan.string()).steps_size(), 2);
    refused({"run", plan.string(), "--input", in("X", "x3.npy"), "--output-dir", out_.string()},
            {"the_det_node", "Det", "no kernel"});
  } else {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("the_det_node"));
    EXPECT_FALSE(fs::exists(plan)) << "a failed compile left a plan";
  }
}

TEST_F(CompileRun, MissingUnknownOrMisshapenInputsAreRefused) {
  const fs::path plan = compile_mlp();
  capture_data_files();
  const std::string p = plan.string();
  const std::string o = out_.string();
  refused({"run", p, "--input", in("x", "x.npy"), "--output-dir", o},
          {"input 'y'", "i64[32]", "not given"});
  refused({"run", p, "--output-dir", o}, {"input 'x'", "f32[32,64]", "not given"});
  refused({"run", p, "--input", in("x", "x16.npy"), "--input", in("y", "y.npy"), "--output-dir", o},
          {"input 'x' must be f32[32,64], got f32[16,64]"});
  refused(
      {"run", p, "--input", in("x", "x_f64.npy"), "--input", in("y", "y.npy"), "--output-dir", o},
      {"input 'x' must be f32[32,64], got f64[32,64]"});
  refused(
      {"run", p, "--input", in("x", "x.npy"), "--input", in("y", "y_i32.npy"), "--output-dir", o},
      {"input 'y' must be i64[32], got i32[32]"});
  refused({"run", p, "--input", in("x", "x.npy"), "--input", in("y", "y.npy"), "--input",
           in("z", "x.npy"), "--output-dir", o},
          {"no input named 'z'"});
  refused(
      {"run", p, "--input", in("x", "absent.npy"), "--input", in("y", "y.npy"), "--output-dir", o},
      {"cannot open", "absent.npy"});
  refused({"run", p, "--input", "x", "--input", in("y", "y.npy"), "--output-dir", o},
          {"expected NAME=FILE"});
}

TEST_F(CompileRun, CorruptedTruncatedOrForeignPlansAreRefused) {
  const fs::path plan = compile_mlp();
  const std::string good = read_bytes(plan);
  fs::remove(plan);
  capture_data_files();
  auto run_plan = [&](const std::string& bytes, const std::vector<std::string>& fragments) {
    const fs::path bad = tmp_ / "bad.plan";
    write_bytes(bad, bytes);
    refused({"run", bad.string(), "--input", in("x", "x.npy"), "--input", in("y", "y.npy"),
             "--output-dir", out_.string()},
            fragments);
    fs::remove(bad);
  };
  std::string flipped = good;
  flipped[good.size() / 2] = static_cast<char>(flipped[good.size() / 2] ^ 0x10);
  run_plan(flipped, {"bad.plan", "corrupted", "checksum"});
  run_plan(good.substr(0, good.size() - 1), {"bad.plan", "truncated"});
  run_plan(good.substr(0, good.size() / 2), {"bad.plan", "truncated"});
  run_plan(good.substr(0, 20), {"bad.plan", "truncated"});
  std::string other_version = good;
  other_version[8] = static_cast<char>(other_version[8] + 1);
  run_plan(other_version, {"bad.plan", "version"});
}

TEST_F(CompileRun, FailedCompileWritesNoPlan) {
  capture_data_files();
  refused({"compile", (tmp_ / "absent.onnx").string(), "-o", (tmp_ / "absent.plan").string()},
          {"cannot open", "absent.onnx"});
  write_bytes(tmp_ / "notes.onnx", "not a model\n");
  refused({"compile", (tmp_ / "notes.onnx").string(), "-o", (tmp_ / "notes.plan").string()},
          {"notes.onnx", "not a valid ONNX model"});
}

// `ampc ops` counts what the compiler rewrites: GridSample and Resize have no CPU operator or
// gradient rule, yet run and train as the ops their lowering makes; GatherND runs on the CPU
// as itself and on CUDA rewritten, with its own gradient rule; Relu is its own.
TEST_F(CompileRun, OpsShowWhatACompileTimeRewriteStandsIn) {
  auto row = [](const std::string& op) {
    const std::string out = expect_success({"ops", "--op", op, "--format", "json"});
    return nlohmann::json::parse(out).at(0);
  };
  for (const char* op : {"GridSample", "Resize"}) {
    const nlohmann::json r = row(op);
    EXPECT_EQ(r["cpu"], true) << op;
    EXPECT_EQ(r["cpu_via"], "lowering") << op;
    EXPECT_EQ(r["gradient_via"], "lowering") << op;
  }
  EXPECT_EQ(row("GridSample")["rewritten_by"], "lower_grid_sample");
  const nlohmann::json gather_nd = row("GatherND");
  EXPECT_EQ(gather_nd["cpu_via"], "op");
  EXPECT_EQ(gather_nd["rewritten_by"], "index_ops_for_cuda");
  EXPECT_EQ(gather_nd["gradient_via"], "rule");
  const nlohmann::json relu = row("Relu");
  EXPECT_EQ(relu["cpu_via"], "op");
  EXPECT_TRUE(relu["rewritten_by"].is_null());
  EXPECT_THAT(expect_success({"ops", "--op", "GridSample"}), HasSubstr("lowered"));
}

// A plan compiled for a CUDA target that the CUDA backend would refuse at load says so at
// compile time, in one stderr line naming the op and the node, and is written all the same
// (the CPU backend runs it); a plan it runs (the mlp with a training-mode Dropout) and a CPU
// target say nothing. Only where ampc is built with the CUDA backend.
TEST_F(CompileRun, CompilingForCudaWarnsOfStepsTheBackendWouldRefuse) {
  const RunResult ops = run_ampc({"ops", "--op", "Relu"});
  if (ops.out.find("generated") == std::string::npos)
    GTEST_SKIP() << "ampc is built without the CUDA backend";
  const std::string mlp = source_path("models/mlp.onnx").string();
  const fs::path hardmax = tmp_ / "mlp_hardmax.onnx", dropout = tmp_ / "mlp_dropout.onnx";
  test::write_mlp_with_unary(mlp, hardmax.string(), "Hardmax", "the_hardmax_node");
  test::write_mlp_with_dropout(mlp, dropout.string(), 0.1f);
  const fs::path plan = tmp_ / "out.plan";
  RunResult r =
      run_ampc({"compile", hardmax.string(), "--target", "cuda:sm_90", "-o", plan.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(plan));
  EXPECT_THAT(r.err, StartsWith("ampc: warning: the CUDA backend cannot run 1 step(s) of this "
                                "plan: Hardmax (node 'the_hardmax_node')"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"compile", hardmax.string(), "--target", "cpu", "-o", plan.string()},
           {"compile", dropout.string(), "--train", "--target", "cuda:sm_90", "--precision", "bf16",
            "-o", plan.string()}}) {
    r = run_ampc(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, IsEmpty()) << args[1];
  }
}

}  // namespace
}  // namespace ampc::testing
