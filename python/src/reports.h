// ampc.inspect, ampc.precision_report and ampc.report: the JSON documents of `ampc inspect
// --format json [--precision-report]` and `ampc report --format json`, from the same
// report functions (report/, runtime/stats, tools/ampc/report_json.h).
#pragma once

#include <string>
#include <vector>

namespace ampc::python {

// `ampc inspect PATH --format json [--precision P] [--precision-report] [--input-shape S]...`
std::string inspect_json(const std::string& path, const std::string& precision,
                         bool precision_report, const std::vector<std::string>& input_shapes);

// `ampc report STATS.jsonl --format json`
std::string report_json(const std::string& stats_path);

}  // namespace ampc::python
