#include "driver/stage_timer.h"

#include <cstdio>

namespace ampc::compiler {

std::string format_stage_times(const StageTimes& times) {
  std::string out = "stage                      ms    nodes after\n";
  double total = 0;
  char line[128];
  for (const auto& t : times) {
    total += t.seconds;
    std::snprintf(line, sizeof line, "%-22s %9.1f  %13lld\n", t.stage.c_str(), t.seconds * 1e3,
                  static_cast<long long>(t.nodes));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-22s %9.1f\n", "total", total * 1e3);
  return out + line;
}

}  // namespace ampc::compiler
