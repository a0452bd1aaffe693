#include "tools/ampc/inspect_memory.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "driver/memory_budget.h"
#include "frontend/onnx/import.h"

namespace ampc::cli {
namespace {

nlohmann::ordered_json breakdown_json(const compiler::MemoryBreakdown& m) {
  return {{"precision", m.precision},
          {"batch", m.batch},
          {"parameters", m.parameters},
          {"optimizer_state", m.optimizer_state},
          {"scaler_state", m.scaler_state},
          {"state", m.state},
          {"arena", m.arena},
          {"low_copies_at_peak", m.low_copies_at_peak},
          {"gradients_at_peak", m.gradients_at_peak},
          {"activations_at_peak", m.activations_at_peak},
          {"constants", m.constants},
          {"inputs", m.inputs},
          {"workspace", m.workspace},
          {"total", m.total()}};
}

// "sgd, momentum 0.9", "adam": the optimizer whose state the columns count.
std::string optimizer_text(const passes::OptimizerOptions& o) {
  std::string text = o.kind;
  if (o.kind == "sgd" && o.momentum != 0) {
    std::ostringstream m;
    m << o.momentum;
    text += (o.nesterov ? ", nesterov momentum " : ", momentum ") + m.str();
  }
  return text;
}

}  // namespace

void inspect_memory(const std::string& model, const MemoryArgs& args, const std::string& precision,
                    const std::vector<std::string>& input_shapes, const std::string& format) {
  namespace mr = compiler;
  compiler::CompileOptions options = args.compile;
  for (const auto& spec : input_shapes) onnx_io::parse_input_shape(spec, options.import);
  const mr::BatchCompiler compiler(model, options);
  const passes::Precision low =
      precision == "bf16" ? passes::Precision::kBF16 : passes::Precision::kFP16;
  const std::vector<passes::Precision> precisions = {passes::Precision::kFP32, low};
  std::vector<mr::MemoryBreakdown> columns;
  for (const auto p : precisions)
    columns.push_back(mr::memory_breakdown(compiler.compile(compiler.model_batch(), p)));
  std::vector<std::pair<int64_t, std::vector<mr::BatchSearch>>> searches;
  for (const auto& size : args.device_memory) {
    const int64_t budget = mr::parse_bytes(size);
    std::vector<mr::BatchSearch> results;
    for (const auto p : precisions) results.push_back(mr::largest_batch(compiler, p, budget));
    searches.emplace_back(budget, std::move(results));
  }
  if (format == "json") {
    nlohmann::ordered_json j = {{"model", model}, {"columns", nlohmann::ordered_json::array()}};
    for (const auto& c : columns) j["columns"].push_back(breakdown_json(c));
    j["largest_batch"] = nlohmann::ordered_json::array();
    for (size_t k = 0; k < searches.size(); ++k) {
      for (size_t i = 0; i < precisions.size(); ++i) {
        const auto& s = searches[k].second[i];
        nlohmann::ordered_json e = {{"device_memory", args.device_memory[k]},
                                    {"budget_bytes", searches[k].first},
                                    {"precision", columns[i].precision},
                                    {"batch", s.largest},
                                    {"compiles", s.compiles}};
        e["at_batch"] = s.largest > 0 ? breakdown_json(s.at_largest) : nullptr;
        e["above"] = s.above ? breakdown_json(*s.above) : nullptr;
        j["largest_batch"].push_back(e);
      }
    }
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << model << ": training step (" << optimizer_text(compiler.options().optimizer)
            << "), memory plan per precision\n"
            << mr::memory_table_text(columns, searches);
}

}  // namespace ampc::cli
