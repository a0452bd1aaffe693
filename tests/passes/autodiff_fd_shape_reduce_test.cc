// Gradient rules of the data-movement ops (rules_shape.cc: Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose) and of the reductions (rules_reduce.cc) against finite differences
// in fp64, on random shapes, axes and keepdims from a seeded generator; ReduceProd at zeros
// against PyTorch's rule worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "driver/pipeline.h"
#include "passes/autodiff/autodiff.h"
#include "runtime/cpu/executor.h"
#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += "_" + std::to_string(x);
  return s;
}

// A random subset of [0, rank), in increasing order, each written negative half the time.
std::vector<int64_t> random_axes(Random& rnd, int64_t rank, int64_t min_count) {
  std::vector<int64_t> axes;
  while (static_cast<int64_t>(axes.size()) < min_count) {
    axes.clear();
    for (int64_t a = 0; a < rank; ++a) {
      if (rnd.coin()) axes.push_back(rnd.coin() ? a : a - rank);
    }
  }
  return axes;
}

TEST(AutodiffFdShapeRandom, ReshapeAndFlatten) {
  Random rnd(11);
  for (int k = 0; k < 6; ++k) {
    const Shape in = rnd.shape(rnd.uniform(1, 3), 1, 4);
    Shape out = in;
    std::reverse(out.begin(), out.end());
    out.insert(out.begin(), 1);
    check({"Reshape_" + str(in), {in}, out, [=](GradBuilder& g, P p) {
             return g.op("Reshape", {p[0], g.ints(out)}, f64(out));
           }});
    const auto rank = static_cast<int64_t>(in.size());
    const int64_t axis = rnd.uniform(-rank, rank);
    const auto split = static_cast<std::ptrdiff_t>(axis < 0 ? axis + rank : axis);
    const Shape flat = {
        std::accumulate(in.begin(), in.begin() + split, int64_t{1}, std::multiplies<>()),
        std::accumulate(in.begin() + split, in.end(), int64_t{1}, std::multiplies<>())};
    check({"Flatten_" + str(in) + "_axis" + std::to_string(axis),
           {in},
           flat,
           [=](GradBuilder& g, P p) {
             return g.op("Flatten", {p[0]}, f64(flat), attrs(Attribute::make_int("axis", axis)));
           }});
  }
}

TEST(AutodiffFdShapeRandom, SqueezeAndUnsqueeze) {
  Random rnd(12);
  for (int k = 0; k < 8; ++k) {
    const Shape core = rnd.shape(rnd.uniform(1, 2), 2, 3);
    // Unsqueeze: 1 or 2 size-1 axes at random positions of the output (core dims are >= 2,
    // so Squeeze without axes removes exactly these).
    const auto extra = static_cast<size_t>(rnd.uniform(1, 2));
    const size_t out_rank = core.size() + extra;
    std::vector<int64_t> positions(out_rank);
    std::iota(positions.begin(), positions.end(), 0);
    std::shuffle(positions.begin(), positions.end(), rnd.engine());
    positions.resize(extra);
    std::sort(positions.begin(), positions.end());
    Shape wide;
    for (int64_t a = 0, next = 0; a < static_cast<int64_t>(out_rank); ++a) {
      const bool inserted = std::binary_search(positions.begin(), positions.end(), a);
      wide.push_back(inserted ? 1 : core[static_cast<size_t>(next++)]);
    }
    std::vector<int64_t> axes;
    for (int64_t a : positions) axes.push_back(rnd.coin() ? a : a - static_cast<int64_t>(out_rank));
    check({"Unsqueeze_" + str(core) + ints_str(axes), {core}, wide, [=](GradBuilder& g, P p) {
             return g.op("Unsqueeze", {p[0], g.ints(axes)}, f64(wide));
           }});
    check({"Squeeze_" + str(wide) + ints_str(axes), {wide}, core, [=](GradBuilder& g, P p) {
             return g.op("Squeeze", {p[0], g.ints(axes)}, f64(core));
           }});
    check({"Squeeze_all_" + str(wide), {wide}, core, [=](GradBuilder& g, P p) {
             return g.op("Squeeze", {p[0]}, f64(core));
           }});
  }
}

TEST(AutodiffFdShapeRandom, Transpose) {
  Random rnd(13);
  for (int k = 0; k < 6; ++k) {
    const Shape in = rnd.shape(rnd.uniform(2, 4), 1, 3);
    std::vector<int64_t> perm(in.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rnd.engine());
    Shape out;
    for (int64_t a : perm) out.push_back(in[static_cast<size_t>(a)]);
    check({"Transpose_" + str(in) + ints_str(perm), {in}, out, [=](GradBuilder& g, P p) {
             return g.op("Transpose", {p[0]}, f64(out), attrs(Attribute::make_ints("perm", perm)));
           }});
    const Shape reversed(in.rbegin(), in.rend());
    check({"Transpose_default_" + str(in), {in}, reversed, [=](GradBuilder& g, P p) {
             return g.op("Transpose", {p[0]}, f64(reversed));
           }});
  }
}

// ReduceSum takes its axes as an input (opset 13), ReduceMean as an attribute (before 18).
Case reduction(const std::string& op, const Shape& in, const std::vector<int64_t>& axes,
               int64_t keepdims, bool noop_with_empty_axes = false) {
  const auto rank = static_cast<int64_t>(in.size());
  Shape out;
  auto reduced = [&](int64_t a) {
    if (axes.empty()) return !noop_with_empty_axes;
    return std::count(axes.begin(), axes.end(), a) +
               std::count(axes.begin(), axes.end(), a - rank) >
           0;
  };
  for (int64_t a = 0; a < rank; ++a) {
    if (!reduced(a))
      out.push_back(in[static_cast<size_t>(a)]);
    else if (keepdims)
      out.push_back(1);
  }
  const std::string name = op + "_" + str(in) + ints_str(axes) + "_keep" +
                           std::to_string(keepdims) + (noop_with_empty_axes ? "_noop" : "");
  return {name, {in}, out, [=](GradBuilder& g, P p) {
            std::vector<ir::Value*> inputs{p[0]};
            auto a = attrs(Attribute::make_int("keepdims", keepdims));
            if (noop_with_empty_axes) a.push_back(Attribute::make_int("noop_with_empty_axes", 1));
            if (!axes.empty() && op == "ReduceSum") inputs.push_back(g.ints(axes));
            if (!axes.empty() && op != "ReduceSum") a.push_back(Attribute::make_ints("axes", axes));
            return g.op(op, inputs, f64(out), std::move(a));
          }};
}

TEST(AutodiffFdReduceRandom, SumAndMean) {
  Random rnd(14);
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    for (int k = 0; k < 8; ++k) {
      const Shape in = rnd.shape(rnd.uniform(1, 3), 1, 3);
      const auto rank = static_cast<int64_t>(in.size());
      check(reduction(op, in, random_axes(rnd, rank, 1), rnd.uniform(0, 1)));
      check(reduction(op, in, {}, rnd.uniform(0, 1)));  // all axes
    }
  }
  check(reduction("ReduceSum", {2, 3}, {}, 1, true));  // no axes and noop: the identity
}

// The reductions whose gradient is a derivative times the spread output gradient (values
// distinct, so Max and Min have one winner; L1 away from its kink at 0).
TEST(AutodiffFdReduceRandom, ReductionsWithDerivatives) {
  Random rnd(15);
  for (const char* op : {"ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax",
                         "ReduceMin", "ReduceProd"}) {
    for (int k = 0; k < 6; ++k) {
      const Shape in = rnd.shape(rnd.uniform(1, 3), 1, 3);
      const auto rank = static_cast<int64_t>(in.size());
      Case c = k % 3 == 2 ? reduction(op, in, {}, rnd.uniform(0, 1))
                          : reduction(op, in, random_axes(rnd, rank, 1), rnd.uniform(0, 1));
      c.kinks = {0.0};
      check(c);
    }
  }
}

// CumSum along a constant axis, inclusive or exclusive, forward or reverse.
// ReduceProd at zeros, where y / x cannot be used, against PyTorch's rule worked by hand:
// a row without zeros gets y / x, a row with one zero only there the product of the others,
// a row with two zeros nothing.
TEST(AutodiffReduceProd, ZerosAsPyTorch) {
  const Case c{"ReduceProd_zeros", {{3, 3}}, {3}, [](GradBuilder& g, P p) {
                 return g.op(
                     "ReduceProd", {p[0]}, f64({3}),
                     attrs(Attribute::make_ints("axes", {1}), Attribute::make_int("keepdims", 0)));
               }};
  auto m = make_model(c, {{2, 3, 4, 0, 5, 6, 0, 0, 7}}, {1, 1, 1});
  const auto grads = passes::differentiate(*m, {.loss = "", .freeze = {"R", "fwd/*"}});
  ASSERT_EQ(grads.size(), 1u);
  m->graph->outputs.push_back(grads[0].gradient);
  rt::cpu::Executor exec(compiler::compile_model(*m, {}, "prod"));
  const rt::Tensor g = exec.run({}).at(grads[0].gradient->name);
  const double want[] = {12, 8, 6, 30, 0, 0, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(g.data<double>()[i], want[i]) << i;
}

TEST(AutodiffFdReduceRandom, CumSum) {
  Random rnd(16);
  for (int k = 0; k < 8; ++k) {
    const Shape in = rnd.shape(rnd.uniform(1, 3), 1, 4);
    const auto rank = static_cast<int64_t>(in.size());
    const int64_t axis = rnd.uniform(-rank, rank - 1);
    const int64_t exclusive = k % 2, reverse = (k / 2) % 2;
    check({"CumSum_" + str(in) + "_axis" + std::to_string(axis) + "_ex" +
               std::to_string(exclusive) + "_rev" + std::to_string(reverse),
           {in},
           in,
           [=](GradBuilder& g, P p) {
             return g.op("CumSum", {p[0], g.ints({axis})}, f64(in),
                         attrs(Attribute::make_int("exclusive", exclusive),
                               Attribute::make_int("reverse", reverse)));
           }});
  }
}

}  // namespace
}  // namespace ampc
