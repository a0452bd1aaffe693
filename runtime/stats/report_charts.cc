#include "runtime/stats/report_charts.h"

#include <filesystem>

#include "base/error.h"
#include "base/file_util.h"
#include "runtime/stats/svg_plot.h"

namespace ampc::rt::stats {

TrainLog read_train_log(const std::string& path) {
  TrainLog log;
  for (const auto& j : read_jsonl(path)) {
    try {
      const double step = j.at("step").get<double>();
      log.step.push_back(step);
      log.loss.push_back(j.at("loss").get<double>());
      log.scale.push_back(j.at("scale").get<double>());
      if (j.at("skipped").get<bool>()) {
        log.skipped_step.push_back(step);
        log.skipped_scale.push_back(log.scale.back());
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ": not an `ampc train --log` file: " + e.what());
    }
  }
  return log;
}

std::string loss_svg(const TrainLog& log) {
  Chart c;
  c.title = "loss";
  c.x_label = "step";
  c.y_label = "loss";
  c.series.push_back({"loss", "#1f4e9a", log.step, log.loss});
  return chart_svg(c);
}

std::string scale_svg(const TrainLog& log) {
  Chart c;
  c.title = "loss scale and skipped steps";
  c.x_label = "step";
  c.y_label = "scale (log2)";
  c.log2_y = true;
  c.series.push_back({"scale used by the step", "#1f4e9a", log.step, log.scale});
  c.series.push_back({"skipped (non-finite gradients): " + std::to_string(log.skipped_step.size()),
                      "#c0392b", log.skipped_step, log.skipped_scale, true});
  return chart_svg(c);
}

std::string gradient_ranges_svg(const RangeReport& r) {
  std::vector<Bar> bars;
  for (const auto& t : r.tensors) {
    if (t.kind != "gradient") continue;
    bars.push_back({t.node + "  " + t.tensor, t.min_nonzero_abs.value_or(0), t.max_abs});
  }
  return log2_bars_svg("unscaled gradient |x| per layer (non-zero, over the recorded steps)", bars,
                       6.103515625e-05, 65504.0, "fp16 normal range [2^-14, 65504]");
}

std::vector<std::string> write_charts(const RangeReport& r, const TrainLog* log,
                                      const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  auto put = [&](const std::string& name, const std::string& svg) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    write_file_atomically(path, svg);
    written.push_back(path);
  };
  put("gradient_ranges.svg", gradient_ranges_svg(r));
  if (log) {
    put("loss.svg", loss_svg(*log));
    put("scale.svg", scale_svg(*log));
  }
  return written;
}

}  // namespace ampc::rt::stats
