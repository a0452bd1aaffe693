// Gradient rules of Conv, ConvTranspose, MaxPool and AveragePool (rules_nn.cc) against finite
// differences in fp64, on random window configurations from a seeded generator: 1-D, 2-D and 3-D,
// groups, strides, dilations, asymmetric pads or auto_pad, ceil_mode, count_include_pad,
// output_padding and output_shape. MaxPool inputs are distinct values, so that no window has a tie.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

// One random window geometry over `rank` spatial axes: the input size, the window
// attributes and the output size they give (ONNX's formulas for Conv and pooling).
struct Window {
  Shape in, kernel, strides, dilations, pads, out;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  std::vector<Attribute> attributes(bool with_dilations = true) const {
    auto a = attrs(Attribute::make_ints("kernel_shape", kernel),
                   Attribute::make_ints("strides", strides));
    if (with_dilations) a.push_back(Attribute::make_ints("dilations", dilations));
    if (auto_pad == "NOTSET")
      a.push_back(Attribute::make_ints("pads", pads));
    else
      a.push_back(Attribute::make_string("auto_pad", auto_pad));
    if (ceil_mode) a.push_back(Attribute::make_int("ceil_mode", 1));
    return a;
  }
  std::string str() const {
    return "in" + fd::str(in) + "_k" + fd::str(kernel) + "_s" + fd::str(strides) + "_d" +
           fd::str(dilations) + "_" + (auto_pad == "NOTSET" ? "p" + fd::str(pads) : auto_pad) +
           (ceil_mode ? "_ceil" : "");
  }
};

// Kernel sizes up to max_k, inputs up to `slack` longer than the dilated kernel. pooling:
// pads below the kernel size and ceil_mode possible (its last window must start inside the
// input or the left padding, as PyTorch requires). No dilations unless `dilate`.
Window random_window(Random& rnd, size_t rank, bool pooling, bool dilate = true, int64_t max_k = 3,
                     int64_t slack = 2) {
  const std::vector<std::string> modes = {"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  for (;;) {
    Window w;
    w.auto_pad = rnd.pick(modes);
    w.ceil_mode = pooling && w.auto_pad == "NOTSET" && rnd.coin();
    bool ok = true;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t k = rnd.uniform(1, max_k), s = rnd.uniform(1, 2);
      const int64_t d = dilate ? rnd.uniform(1, 2) : 1;
      const int64_t eff = (k - 1) * d + 1, in = eff + rnd.uniform(0, slack);
      const int64_t pb = rnd.uniform(0, pooling ? k - 1 : 2),
                    pe = rnd.uniform(0, pooling ? k - 1 : 2);
      int64_t out = 0;
      if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
        out = (in + s - 1) / s;
      } else if (w.auto_pad == "VALID") {
        out = (in - eff) / s + 1;
      } else {
        const int64_t span = in + pb + pe - eff;
        out = 1 + (w.ceil_mode ? (span + s - 1) / s : span / s);
        ok &= (out - 1) * s < in + pb;
      }
      w.in.push_back(in);
      w.kernel.push_back(k);
      w.strides.push_back(s);
      w.dilations.push_back(d);
      w.pads.push_back(pb);
      w.pads.push_back(pe);  // reordered to begin..., end... below
      w.out.push_back(out);
    }
    Shape pads;
    for (size_t i = 0; i < rank; ++i) pads.push_back(w.pads[2 * i]);
    for (size_t i = 0; i < rank; ++i) pads.push_back(w.pads[2 * i + 1]);
    w.pads = pads;
    if (ok) return w;
  }
}

TEST(AutodiffFdConvRandom, Conv) {
  Random rnd(41);
  for (int k = 0; k < 24; ++k) {
    const size_t rank = k % 8 == 7 ? 3 : static_cast<size_t>(1 + k % 2);
    // Small 2-D and 3-D inputs: every input element costs two compiled graphs.
    const Window w = rank == 3 ? random_window(rnd, rank, false, false, 2, 1)
                               : random_window(rnd, rank, false, true, 3, rank == 1 ? 3 : 2);
    const int64_t group = rnd.uniform(1, 2), n = rank == 1 ? 2 : 1;
    const int64_t c = group * rnd.uniform(1, rank == 3 ? 1 : 2), m = group * rnd.uniform(1, 2);
    std::vector<Shape> params = {nc(n, c, w.in), nc(m, c / group, w.kernel)};
    const bool bias = rnd.coin();
    if (bias) params.push_back({m});
    const Shape out = nc(n, m, w.out);
    check({"Conv_" + w.str() + "_g" + std::to_string(group) + (bias ? "_bias" : ""), params, out,
           [=](GradBuilder& g, P p) {
             auto a = w.attributes();
             a.push_back(Attribute::make_int("group", group));
             return g.op("Conv", p, f64(out), std::move(a));
           }});
  }
}

TEST(AutodiffFdConvRandom, ConvTranspose) {
  Random rnd(42);
  const std::vector<std::string> modes = {"pads",       "pads",  "SAME_UPPER",
                                          "SAME_LOWER", "VALID", "output_shape"};
  for (int k = 0; k < 24; ++k) {
    const size_t rank = static_cast<size_t>(1 + k % 2);
    const std::string mode = rnd.pick(modes);
    Shape in, kernel, strides, dilations, out_pad, pads(2 * rank), out;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t s = rnd.uniform(1, 2), d = rnd.uniform(1, 2);
      // SAME needs a window at least as long as the stride (else the begin pad is negative).
      const int64_t kk = rnd.uniform(mode.starts_with("SAME") ? 2 : 1, 3);
      const int64_t x = rnd.uniform(1, 3), op = mode == "output_shape" ? 0 : rnd.uniform(0, s - 1);
      const int64_t reach = s * (x - 1) + (kk - 1) * d + 1;
      pads[i] = rnd.uniform(0, 1);
      pads[i + rank] = rnd.uniform(0, 1);
      if (reach + op - pads[i] - pads[i + rank] < 1) pads[i] = pads[i + rank] = 0;
      int64_t o = reach + op;
      if (mode == "pads") o -= pads[i] + pads[i + rank];
      if (mode.starts_with("SAME")) o = x * s;
      if (mode == "output_shape") o = std::max<int64_t>(1, reach - rnd.uniform(0, 2));
      in.push_back(x);
      kernel.push_back(kk);
      strides.push_back(s);
      dilations.push_back(d);
      out_pad.push_back(op);
      out.push_back(o);
    }
    const int64_t group = rnd.uniform(1, 2), c = group * rnd.uniform(1, 2);
    const int64_t m = group * rnd.uniform(1, 2), n = rnd.uniform(1, 2);
    std::vector<Shape> params = {nc(n, c, in), nc(c, m / group, kernel)};
    const bool bias = rnd.coin();
    if (bias) params.push_back({m});
    const Shape y = nc(n, m, out);
    check({"ConvTranspose_" + mode + "_in" + str(in) + "_k" + str(kernel) + "_s" + str(strides) +
               "_d" + str(dilations) + "_op" + str(out_pad) + "_g" + std::to_string(group),
           params, y, [=](GradBuilder& g, P p) {
             auto a = attrs(Attribute::make_ints("strides", strides),
                            Attribute::make_ints("dilations", dilations),
                            Attribute::make_ints("output_padding", out_pad),
                            Attribute::make_int("group", group));
             if (mode == "pads") a.push_back(Attribute::make_ints("pads", pads));
             if (mode == "output_shape") a.push_back(Attribute::make_ints("output_shape", out));
             if (mode != "pads" && mode != "output_shape")
               a.push_back(Attribute::make_string("auto_pad", mode));
             return g.op("ConvTranspose", p, f64(y), std::move(a));
           }});
  }
}

TEST(AutodiffFdConvRandom, MaxPool) {
  Random rnd(43);
  for (int k = 0; k < 16; ++k) {
    const Window w = random_window(rnd, static_cast<size_t>(1 + k % 2), true);
    const Shape x = nc(1, 2, w.in), y = nc(1, 2, w.out);
    Case c{"MaxPool_" + w.str(), {x}, y, [=](GradBuilder& g, P p) {
             return g.op("MaxPool", p, f64(y), w.attributes());
           }};
    c.distinct = true;
    check(c);
  }
}

TEST(AutodiffFdConvRandom, AveragePool) {
  Random rnd(44);
  for (int k = 0; k < 16; ++k) {
    // No dilations: AveragePool has them only from opset 19.
    const Window w = random_window(rnd, static_cast<size_t>(1 + k % 2), true, false);
    const bool include = rnd.coin();
    const Shape x = nc(2, 1, w.in), y = nc(2, 1, w.out);
    check({"AveragePool_" + w.str() + (include ? "_include_pad" : ""),
           {x},
           y,
           [=](GradBuilder& g, P p) {
             auto a = w.attributes(false);
             a.push_back(Attribute::make_int("count_include_pad", include));
             return g.op("AveragePool", p, f64(y), std::move(a));
           }});
  }
}

}  // namespace
}  // namespace ampc
