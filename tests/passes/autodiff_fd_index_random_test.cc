// Gradient rules of the indexing ops (rules_index.cc: Gather, Concat, Split, Slice, Expand,
// Tile, Pad) against finite differences in fp64, on random shapes, axes, indices, slice
// bounds and pads from a seeded generator (fixed cases: autodiff_fd_index_softmax_test.cc).
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

int64_t random_axis(Random& rnd, size_t rank) {  // negative half the time
  const auto r = static_cast<int64_t>(rank);
  const int64_t a = rnd.uniform(0, r - 1);
  return rnd.coin() ? a : a - r;
}

size_t positive(int64_t axis, size_t rank) {
  return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

TEST(AutodiffFdIndexRandom, Gather) {
  Random rnd(51);
  for (int k = 0; k < 8; ++k) {
    const Shape data = rnd.shape(rnd.uniform(1, 3), 1, 3);
    const int64_t axis = random_axis(rnd, data.size());
    const int64_t dim = data[positive(axis, data.size())];
    const Shape idx_shape = rnd.shape(rnd.uniform(0, 2), 1, 3);
    std::vector<int64_t> idx(static_cast<size_t>(ir::shape_numel(idx_shape)));
    for (int64_t& i : idx) i = rnd.uniform(-dim, dim - 1);  // repeats and negatives
    Shape out(data.begin(),
              data.begin() + static_cast<std::ptrdiff_t>(positive(axis, data.size())));
    out.insert(out.end(), idx_shape.begin(), idx_shape.end());
    out.insert(out.end(),
               data.begin() + static_cast<std::ptrdiff_t>(positive(axis, data.size())) + 1,
               data.end());
    check({"Gather_" + str(data) + "_axis" + std::to_string(axis) + "_idx" + str(idx_shape),
           {data},
           out,
           [=](GradBuilder& g, P p) {
             return g.op("Gather", {p[0], int_tensor(g, idx, idx_shape)}, f64(out),
                         attrs(Attribute::make_int("axis", axis)));
           }});
  }
}

TEST(AutodiffFdIndexRandom, ConcatAndSplit) {
  Random rnd(52);
  for (int k = 0; k < 8; ++k) {
    const Shape base = rnd.shape(rnd.uniform(1, 3), 1, 3);
    const int64_t axis = random_axis(rnd, base.size());
    const size_t a = positive(axis, base.size());
    std::vector<Shape> parts(static_cast<size_t>(rnd.uniform(1, 3)), base);
    Shape out = base;
    out[a] = 0;
    for (Shape& s : parts) out[a] += s[a] = rnd.uniform(1, 3);
    check(
        {"Concat_" + std::to_string(parts.size()) + "_" + str(out) + "_axis" + std::to_string(axis),
         parts, out, [=](GradBuilder& g, P p) {
           return g.op("Concat", p, f64(out), attrs(Attribute::make_int("axis", axis)));
         }});
    // Split of `out` into `parts`; the loss reads one output, or all of them in reverse order.
    std::vector<int64_t> sizes;
    std::vector<ir::TensorType> types;
    for (const Shape& s : parts) {
      sizes.push_back(s[a]);
      types.push_back(f64(s));
    }
    const int64_t used = rnd.uniform(-1, static_cast<int64_t>(parts.size()) - 1);  // -1: all
    const Shape y = used < 0 ? out : parts[static_cast<size_t>(used)];
    check({"Split_" + str(out) + "_axis" + std::to_string(axis) + "_used" + std::to_string(used),
           {out},
           y,
           [=](GradBuilder& g, P p) {
             auto outs = g.op_n("Split", {p[0], g.ints(sizes)}, types,
                                attrs(Attribute::make_int("axis", axis)));
             if (used >= 0) return outs[static_cast<size_t>(used)];
             std::reverse(outs.begin(), outs.end());
             return g.op("Concat", outs, f64(y), attrs(Attribute::make_int("axis", axis)));
           }});
  }
}

// ONNX's Slice: the number of elements taken along one axis of size `dim`.
int64_t slice_count(int64_t dim, int64_t start, int64_t end, int64_t step) {
  int64_t s = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    return std::max<int64_t>(0, (e - s + step - 1) / step);
  }
  s = std::clamp<int64_t>(s, 0, dim - 1);
  e = std::clamp<int64_t>(e, -1, dim - 1);
  return std::max<int64_t>(0, (s - e - step - 1) / -step);
}

TEST(AutodiffFdIndexRandom, Slice) {
  Random rnd(53);
  for (int k = 0; k < 14; ++k) {
    const Shape in = rnd.shape(rnd.uniform(1, 3), 2, 6);
    std::vector<int64_t> starts, ends, axes, steps;
    Shape out = in;
    for (size_t a = 0; a < in.size(); ++a) {
      if (rnd.coin() && !axes.empty()) continue;  // axis not sliced
      const int64_t d = in[a];
      int64_t s = 0, e = 0, st = 1;
      do {
        s = rnd.uniform(-d - 1, d + 1);
        e = rnd.uniform(-d - 1, d + 1);
        st = rnd.pick(std::vector<int64_t>{-3, -2, -1, 1, 1, 2, 3});
      } while (slice_count(d, s, e, st) == 0);
      starts.push_back(s);
      ends.push_back(e);
      axes.push_back(rnd.coin() ? static_cast<int64_t>(a)
                                : static_cast<int64_t>(a) - static_cast<int64_t>(in.size()));
      steps.push_back(st);
      out[a] = slice_count(d, s, e, st);
    }
    check({"Slice_" + str(in) + "_" + std::to_string(k), {in}, out, [=](GradBuilder& g, P p) {
             return g.op("Slice", {p[0], g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)},
                         f64(out));
           }});
  }
}

TEST(AutodiffFdIndexRandom, ExpandTilePad) {
  Random rnd(54);
  for (int k = 0; k < 6; ++k) {
    const Shape out = rnd.shape(rnd.uniform(1, 3), 1, 3);
    const Shape in = rnd.broadcastable_to(out);
    check({"Expand_" + str(in) + "_to_" + str(out), {in}, out, [=](GradBuilder& g, P p) {
             return g.op("Expand", {p[0], g.ints(out)}, f64(out));
           }});

    const Shape x = rnd.shape(rnd.uniform(1, 3), 1, 3);
    std::vector<int64_t> repeats;
    Shape tiled;
    for (int64_t d : x) {
      repeats.push_back(rnd.uniform(1, 3));
      tiled.push_back(d * repeats.back());
    }
    check({"Tile_" + str(x) + "_to_" + str(tiled), {x}, tiled, [=](GradBuilder& g, P p) {
             return g.op("Tile", {p[0], g.ints(repeats)}, f64(tiled));
           }});

    // Constant (maybe with a trainable value), edge or reflect (pads below the axis' size).
    const std::string mode = std::vector<std::string>{"constant", "edge", "reflect"}.at(
        static_cast<size_t>(rnd.uniform(0, 2)));
    std::vector<int64_t> pads(2 * x.size());
    for (size_t i = 0; i < pads.size(); ++i) {
      const int64_t most = mode == "reflect" ? std::min<int64_t>(2, x[i % x.size()] - 1) : 2;
      pads[i] = rnd.uniform(0, most);
    }
    Shape padded = x;
    for (size_t a = 0; a < x.size(); ++a) padded[a] += pads[a] + pads[a + x.size()];
    const bool value = mode == "constant" && rnd.coin();  // a trainable padding value
    std::vector<Shape> params = {x};
    if (value) params.push_back({});
    check({"Pad_" + mode + "_" + str(x) + "_to_" + str(padded) + (value ? "_value" : ""), params,
           padded, [=](GradBuilder& g, P p) {
             std::vector<ir::Value*> in = {p[0], g.ints(pads)};
             if (value) in.push_back(p[1]);
             return g.op("Pad", in, f64(padded), attrs(ir::Attribute::make_string("mode", mode)));
           }});
  }
}

}  // namespace
}  // namespace ampc
