// Minimal SVG charts for `ampc report` (written here rather than through gnuplot or
// matplotlib: no extra package, and the pictures are plain text the tests can parse).
#pragma once

#include <string>
#include <vector>

namespace ampc::rt::stats {

struct Series {
  std::string label;
  std::string color;  // an SVG colour
  std::vector<double> x, y;
  bool points = false;  // markers instead of a line
};

struct Chart {
  std::string title, x_label, y_label;
  bool log2_y = false;  // y axis in powers of two (values <= 0 are left out)
  std::vector<Series> series;
  int width = 760, height = 300;
};

// One chart as a standalone SVG document; an empty chart draws its axes and title only.
std::string chart_svg(const Chart& c);

// Horizontal bars on a log2 axis: one per row, from lo to hi (both > 0), with a band marking
// [band_lo, band_hi] (fp16's normal range) behind them.
struct Bar {
  std::string label;
  double lo = 0, hi = 0;
};
std::string log2_bars_svg(const std::string& title, const std::vector<Bar>& bars, double band_lo,
                          double band_hi, const std::string& band_label);

}  // namespace ampc::rt::stats
