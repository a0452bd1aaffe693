#include "python/src/reports.h"

#include <filesystem>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "lower/plan_emit.h"
#include "passes/constant_folding.h"
#include "report/plan_precision.h"
#include "report/plan_summary.h"
#include "report/precision_report.h"
#include "report/summary.h"
#include "runtime/plan/plan_file.h"
#include "runtime/stats/range_report.h"
#include "tools/ampc/report_json.h"

namespace ampc::python {

// The choices of run_inspect (tools/ampc/inspect_command.cc) for the JSON views.
std::string inspect_json(const std::string& path, const std::string& precision,
                         bool precision_report, const std::vector<std::string>& input_shapes) {
  if (plan::looks_like_plan(path) || std::filesystem::path(path).extension() == ".plan") {
    if (precision != "fp32" || !input_shapes.empty())
      throw Error(
          "precision and input_shapes apply to ONNX models; a plan's were fixed when "
          "it was compiled");
    const plan::Plan p = plan::load_plan(path);
    if (precision_report)
      return report::precision_report_json(report::precision_report_of_plan(p)).dump(2);
    return report::plan_summary_json(p).dump(2);
  }
  onnx_io::ImportOptions options;
  for (const auto& spec : input_shapes) onnx_io::parse_input_shape(spec, options);
  passes::AutocastOptions autocast;
  autocast.precision = passes::parse_precision(precision);
  const bool autocast_report = precision_report && autocast.precision != passes::Precision::kFP32;
  options.training = precision_report && !autocast_report;
  const auto model = onnx_io::load_model(path, options);
  passes::AutocastReport decided;
  if (autocast.precision != passes::Precision::kFP32) {
    decided = compiler::autocast_prepared(*model, autocast);
  }
  if (autocast_report) return report::precision_report_json(report::from_autocast(decided)).dump(2);
  if (precision_report) {
    passes::fold_constants(*model);
    const plan::Plan lowered = lower::emit_plan(*model, {});
    return report::precision_report_json(
               report::plan_precision_report(lowered, report::PlanOrigin::kModel))
        .dump(2);
  }
  return report::model_summary_json(*model).dump(2);
}

std::string report_json(const std::string& stats_path) {
  return cli::report_json(rt::stats::analyze(rt::stats::read_jsonl(stats_path))).dump(2);
}

}  // namespace ampc::python
