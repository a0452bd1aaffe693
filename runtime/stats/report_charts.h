// The pictures of `ampc report`: loss, loss scale and skipped steps over training from a
// train log (`ampc train --log`), and the gradient ranges per layer from a --grad-stats log.
#pragma once

#include <string>
#include <vector>

#include "runtime/stats/range_report.h"

namespace ampc::rt::stats {

struct TrainLog {
  std::vector<double> step, loss, scale;
  std::vector<double> skipped_step, skipped_scale;  // the skipped steps and their scale
};

// Reads `ampc train --log` lines ({"step", "loss", "scale", "skipped", ...}).
TrainLog read_train_log(const std::string& path);

std::string loss_svg(const TrainLog& log);
std::string scale_svg(const TrainLog& log);  // log2 axis, skipped steps marked
std::string gradient_ranges_svg(const RangeReport& r);

// Writes every picture that has data into `dir` (created); returns the files written.
std::vector<std::string> write_charts(const RangeReport& r, const TrainLog* log,
                                      const std::string& dir);

}  // namespace ampc::rt::stats
