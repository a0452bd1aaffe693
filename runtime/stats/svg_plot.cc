#include "runtime/stats/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/markup_escape.h"
#include "runtime/stats/axis_ticks.h"

namespace ampc::rt::stats {
namespace {

constexpr int kLeft = 70, kRight = 20, kTop = 30, kBottom = 45;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Text width is not known without the font; an upper estimate of a sans-serif glyph's
// advance at font-size 11 (0.7 em; the average of such fonts is about 0.55 em) keeps labels
// from running off the picture.
constexpr double kGlyphWidth = 0.7 * 11;

double text_width(const std::string& s) {
  return kGlyphWidth * static_cast<double>(s.size());
}

std::string header(int w, int h, const std::string& title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
         std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n" +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" +
         std::to_string(w / 2) + "\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">" +
         markup_escape(title) + "</text>\n";
}

}  // namespace

std::string chart_svg(const Chart& c) {
  const double pw = c.width - kLeft - kRight, ph = c.height - kTop - kBottom;
  auto ty = [&](double y) { return c.log2_y ? std::log2(y) : y; };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : c.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (c.log2_y && s.y[i] <= 0)) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i]));
      y1 = std::max(y1, ty(s.y[i]));
    }
  }
  if (!(x0 <= x1)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  // Ticks at round values; the axes run from the first tick to the last. Whole-number x
  // (steps) and log2 exponents get whole-number ticks.
  bool whole_x = true;
  for (const auto& s : c.series)
    for (double x : s.x) whole_x &= x == std::floor(x);
  const AxisTicks xt = nice_ticks(x0, x1, 5, whole_x), yt = nice_ticks(y0, y1, 5, c.log2_y);
  x0 = xt.lo, x1 = xt.hi, y0 = yt.lo, y1 = yt.hi;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (ty(y) - y0) / (y1 - y0)) * ph; };
  std::string svg = header(c.width, c.height, c.title);
  svg += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) +
         "\" height=\"" + num(ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
  for (size_t i = 0; i < xt.values.size(); ++i) {
    svg += "<text class=\"xtick\" x=\"" + num(px(xt.values[i])) + "\" y=\"" + num(kTop + ph + 15) +
           "\" text-anchor=\"middle\">" + xt.labels[i] + "</text>\n";
  }
  for (size_t i = 0; i < yt.values.size(); ++i) {
    const double y = kTop + (1 - (yt.values[i] - y0) / (y1 - y0)) * ph;
    svg += "<text class=\"ytick\" x=\"" + num(kLeft - 5) + "\" y=\"" + num(y + 4) +
           "\" text-anchor=\"end\">" + (c.log2_y ? "2^" : "") + yt.labels[i] + "</text>\n";
  }
  svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(c.height - 8) +
         "\" text-anchor=\"middle\">" + markup_escape(c.x_label) + "</text>\n";
  svg += "<text x=\"14\" y=\"" + num(kTop + ph / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + num(kTop + ph / 2) + ")\">" +
         markup_escape(c.y_label) + "</text>\n";
  int legend = 0;
  for (const auto& s : c.series) {
    std::string pts;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (c.log2_y && s.y[i] <= 0)) continue;
      if (s.points) {
        svg += "<circle cx=\"" + num(px(s.x[i])) + "\" cy=\"" + num(py(s.y[i])) +
               "\" r=\"3\" fill=\"" + s.color + "\"/>\n";
      } else {
        pts += num(px(s.x[i])) + "," + num(py(s.y[i])) + " ";
      }
    }
    if (!pts.empty())
      svg += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\" points=\"" +
             pts + "\"/>\n";
    svg += "<text x=\"" + num(kLeft + 8) + "\" y=\"" + num(kTop + 14 + 14 * legend++) +
           "\" fill=\"" + s.color + "\">" + markup_escape(s.label) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::string log2_bars_svg(const std::string& title, const std::vector<Bar>& bars, double band_lo,
                          double band_hi, const std::string& band_label) {
  constexpr int kRow = 18, kPlotWidth = 620;
  // The label column is as wide as the longest label needs (text-anchor end at its right).
  double longest = 0;
  for (const auto& b : bars) longest = std::max(longest, text_width(b.label));
  const int kLabel = std::max(120, static_cast<int>(std::ceil(longest)) + 16);
  const int width = kLabel + kPlotWidth + kRight, plot_w = kPlotWidth;
  const int height = kTop + kBottom + kRow * static_cast<int>(std::max<size_t>(bars.size(), 1));
  double l0 = std::log2(band_lo), l1 = std::log2(band_hi);
  for (const auto& b : bars) {
    if (b.lo > 0) l0 = std::min(l0, std::log2(b.lo));
    if (b.hi > 0) l1 = std::max(l1, std::log2(b.hi));
  }
  // Whole-number exponents at round steps (2^-40, 2^-30, ...), the axis from tick to tick.
  const AxisTicks ticks = nice_ticks(std::floor(l0) - 1, std::ceil(l1) + 1, 6, true);
  l0 = ticks.lo;
  l1 = ticks.hi;
  auto px = [&](double v) { return kLabel + (std::log2(v) - l0) / (l1 - l0) * plot_w; };
  std::string svg = header(width, height, title);
  const double ph = height - kTop - kBottom;
  svg += "<rect x=\"" + num(px(band_lo)) + "\" y=\"" + num(kTop) + "\" width=\"" +
         num(px(band_hi) - px(band_lo)) + "\" height=\"" + num(ph) +
         "\" fill=\"#dfefdf\"/>\n<text x=\"" + num(px(band_lo) + 4) + "\" y=\"" +
         num(kTop + ph + 28) + "\" fill=\"#3a7a3a\">" + markup_escape(band_label) + "</text>\n";
  for (double v : ticks.values) {
    const int e = static_cast<int>(v);
    const double x = px(std::ldexp(1.0, e));
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(kTop + ph) + "\" stroke=\"#ccc\"/>\n<text x=\"" + num(x) + "\" y=\"" +
           num(kTop + ph + 14) + "\" class=\"xtick\" text-anchor=\"middle\">2^" +
           std::to_string(e) + "</text>\n";
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = kTop + kRow * static_cast<double>(i);
    svg += "<text class=\"label\" x=\"" + num(kLabel - 6) + "\" y=\"" + num(y + 13) +
           "\" text-anchor=\"end\">" + markup_escape(b.label) + "</text>\n";
    if (b.lo > 0 && b.hi >= b.lo)
      svg += "<rect x=\"" + num(px(b.lo)) + "\" y=\"" + num(y + 4) + "\" width=\"" +
             num(std::max(px(b.hi) - px(b.lo), 2.0)) + "\" height=\"" + num(kRow - 8) +
             "\" fill=\"#4a6fb5\"/>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace ampc::rt::stats
