// The JSON of `ampc report --format json` (a range report of `--grad-stats` statistics),
// shared with the Python API's ampc.report().
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/stats/range_report.h"

namespace ampc::cli {

nlohmann::ordered_json report_json(const rt::stats::RangeReport& r);

}  // namespace ampc::cli
