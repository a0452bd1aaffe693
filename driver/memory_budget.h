// `ampc inspect MODEL|PLAN --memory [--device-memory SIZE]` (docs/amp-diagnostics.md): a
// training plan's planned bytes by category, side by side for fp32 and a 16-bit precision,
// and the largest batch that fits a device, found by compiling the model at other batch sizes
// and planning its memory (binary search; no PTX is generated while searching).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::compiler {

// Bytes by category. State: parameters (the model's own state, Buffer.from_model: fp32
// masters in a mixed plan, running statistics), loss-scaler state (the training signature's
// scaler_state), optimizer state (the rest: moments, momentum buffers, step counters,
// gradient accumulators). The arena's buffers live at its peak (lower/plan_memory.h
// arena_peak): low-precision copies of parameters (Casts of STATE buffers), gradients (what
// backward and loss-scaling steps write, Step.source_phases), activations (the rest). total = state
// + constants + inputs + arena + workspace (the regions as planned, Plan.memory): what a device
// allocates for the plan.
struct MemoryBreakdown {
  int64_t batch = 0;
  std::string precision;
  int64_t parameters = 0, optimizer_state = 0, scaler_state = 0;
  int64_t low_copies_at_peak = 0, gradients_at_peak = 0, activations_at_peak = 0;
  int64_t state = 0;  // the STATE region as planned (the three above, aligned)
  int64_t arena = 0, constants = 0, inputs = 0, workspace = 0;
  int64_t total() const { return state + arena + constants + inputs + workspace; }
};

MemoryBreakdown memory_breakdown(const plan::Plan& p);

// Compiles a training plan of a model at other batch sizes: every graph input whose first
// dimension is the model's batch (that of its first input) gets `batch`, and Reshape target
// shapes the exporter baked with the batch (after constant folding, a leading dimension that
// is a multiple of it and does not fit the data) are scaled to it.
class BatchCompiler {
 public:
  // `model_path`: an ONNX forward model, or a training plan (its embedded training model's
  // main graph, the forward, and the options recorded in the plan).
  BatchCompiler(const std::string& model_path, CompileOptions options);
  int64_t model_batch() const { return model_batch_; }
  const CompileOptions& options() const { return options_; }
  // The plan at `batch` (memory planned, no PTX); throws ampc::Error when it cannot be made.
  plan::Plan compile(int64_t batch, passes::Precision precision) const;

 private:
  std::string model_bytes_;
  std::string model_dir_;
  CompileOptions options_;
  int64_t model_batch_ = 0;
  std::vector<std::string> batch_inputs_;
  std::set<std::string> parameters_;  // initializers that are the model's (trainable) own
};

struct BatchSearch {
  int64_t largest = 0;  // 0: not even batch 1 fits
  MemoryBreakdown at_largest;
  std::optional<MemoryBreakdown> above;  // largest + 1, which does not fit
  int compiles = 0;
};

// The largest batch whose plan's total is at most `budget` bytes (up to 2^31).
BatchSearch largest_batch(const BatchCompiler& c, passes::Precision precision, int64_t budget);

// "80GiB", "141GB", "512MiB", "1048576": bytes; throws ampc::Error on anything else.
int64_t parse_bytes(const std::string& text);

// The side-by-side table (and the batch search results when given).
std::string memory_table_text(
    const std::vector<MemoryBreakdown>& columns,
    const std::vector<std::pair<int64_t, std::vector<BatchSearch>>>& searches);

}  // namespace ampc::compiler
