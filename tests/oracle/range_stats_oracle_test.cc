// The range statistics compiled into a training step (`ampc train --grad-stats`,
// passes/range_stats.h) against numpy: one step of mlp and gpt (fp16 with dynamic loss
// scaling, and fp32), every RangeStats input (unscaled fp32 gradients, fp16/fp32 activations)
// made a plan output and dumped, then tests/oracle/range_stats_oracle.py recomputes every
// statistic from the dumps and must agree exactly. Also: with the switch off, the outputs are
// zeros; every trained parameter has its gradient reported, named by its layer.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "driver/pipeline.h"
#include "kernels/shared/range_stats.h"
#include "lower/plan_memory.h"
#include "runtime/cpu/executor.h"
#include "runtime/data/batcher.h"
#include "runtime/io/npy.h"
#include "runtime/stats/range_stats_log.h"
#include "tests/support/temp_dir.h"

using ampc::test::TempDir;

namespace ampc::testing {
namespace {

namespace rs = kernels::range_stats;

struct Case {
  std::string model, data;
  passes::Precision precision;
};

std::string source(const std::string& rel) {
  return std::string(AMPC_SOURCE_DIR) + "/" + rel;
}

void check_model(const Case& c) {
  compiler::CompileOptions o;
  o.train = true;
  o.optimizer.kind = "adam";
  o.autocast.precision = c.precision;
  o.range_stats = {.gradients = true, .activations = true};
  o.lowering.target = "cpu";
  plan::Plan p = compiler::compile_file(source(c.model), o);
  // Every RangeStats input becomes a plan output ("dump.N"), then the memory is planned again.
  const auto tensors = rt::stats::stats_tensors(p);
  ASSERT_FALSE(tensors.empty());
  std::vector<std::pair<std::string, const plan::Step*>> dumps;
  int n = 0;
  for (const auto& s : p.steps()) {
    if (s.op() != "RangeStats") continue;
    auto& b = *p.mutable_buffers(s.inputs(0));
    if (b.role() == plan::ACTIVATION) b.set_role(plan::OUTPUT);
    auto* out = p.add_outputs();
    out->set_name("dump." + std::to_string(n++));
    out->set_buffer(b.id());
    dumps.emplace_back(out->name(), &s);
  }
  lower::plan_memory(p);
  std::vector<std::tuple<std::string, std::string, bool>> meta;  // dump, stats output, gradient
  for (const auto& [dump, step] : dumps)
    meta.emplace_back(dump, p.buffers(step->outputs(0)).name(), step->inputs_size() > 2);
  std::set<std::string> parameters;
  for (const auto& t : tensors) {
    if (t.kind == "gradient") {
      parameters.insert(t.tensor);
      EXPECT_FALSE(t.node.empty());
      EXPECT_GE(t.depth, 0) << t.tensor;
    }
  }
  rt::cpu::Executor ex(std::move(p));
  EXPECT_GE(parameters.size(), 4u);
  std::map<std::string, rt::data::InputSpec> specs;
  int64_t batch = 0;
  for (const auto& in : ex.plan().inputs()) {
    if (in.name() == rt::stats::kStatsEnabledInput) continue;
    const auto& b = ex.plan().buffers(in.buffer());
    specs[in.name()] = {static_cast<DType>(b.dtype()), {b.shape().begin() + 1, b.shape().end()}};
    batch = b.shape(0);
  }
  rt::data::Batcher batcher(rt::data::Dataset::open(source(c.data)), specs, {.batch_size = batch});
  auto feeds = batcher.next();
  rt::stats::RangeStatsLog::set_enabled(feeds, false);
  auto outputs = ex.run(feeds);
  for (const auto& t : tensors) {
    const auto& s = outputs.at(t.output);
    for (int64_t i = 0; i < s.numel(); ++i) ASSERT_EQ(s.data<double>()[i], 0.0) << t.output;
  }
  feeds = batcher.next();
  rt::stats::RangeStatsLog::set_enabled(feeds, true);
  // The scale of this (second) step: the dynamic scale's initial value (no overflow in step 1).
  const double scale = c.precision == passes::Precision::kFP32 ? 1.0 : 65536.0;
  outputs = ex.run(feeds);
  TempDir dir;
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& [dump, stats, grad] : meta) {
    rt::io::write_npy(outputs.at(dump), dir / (dump + ".npy"));
    rt::io::write_npy(outputs.at(stats), dir / (dump + ".stats.npy"));
    manifest.push_back({{"name", stats},
                        {"values", dump + ".npy"},
                        {"stats", dump + ".stats.npy"},
                        {"scale", grad ? scale : 1.0}});
    EXPECT_EQ(outputs.at(stats).data<double>()[rs::kScale], grad ? scale : 1.0) << stats;
  }
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const std::string cmd = "/usr/bin/python3 '" + source("tests/oracle/range_stats_oracle.py") +
                          "' '" + dir.path().string() + "'";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << c.model;
}

TEST(RangeStatsOracle, MlpFp16) {
  check_model({"models/mlp.onnx", "models/data/digits.npz", passes::Precision::kFP16});
}
TEST(RangeStatsOracle, MlpFp32) {
  check_model({"models/mlp.onnx", "models/data/digits.npz", passes::Precision::kFP32});
}
TEST(RangeStatsOracle, GptFp16) {
  check_model({"models/gpt.onnx", "models/data/seqtask.npz", passes::Precision::kFP16});
}

}  // namespace
}  // namespace ampc::testing
