// `ampc train --log FILE`: one JSON object per optimizer step (JSON lines), flushed as it is
// written so that a run that stops leaves every step it finished.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ampc::cli {

// One line of the log.
struct StepRecord {
  int64_t step = 0;
  float loss = 0;  // the sum of the losses, each the mean over the micro-batches
  float lr = 0;
  double scale = 1;
  bool skipped = false;
  std::optional<float> grad_norm;  // null in the log when the plan does not compute it
  double samples_per_s = 0;
  // Each loss by name, when there are several (the field is left out otherwise).
  std::vector<std::pair<std::string, float>> losses;
};

class StepLog {
 public:
  // Opens (truncates) `path`; an empty path logs nothing.
  explicit StepLog(const std::string& path);
  bool is_open() const { return out_.is_open(); }
  void write(const StepRecord& r);
  void close() { out_.close(); }

 private:
  std::ofstream out_;
};

}  // namespace ampc::cli
