// Gradient rules of training-mode BatchNormalization, LayerNormalization, LpNormalization
// and GlobalAveragePool (rules_nn.cc) against finite differences in fp64, on random shapes,
// axes, epsilons and scale shapes from a seeded generator.
#include <gtest/gtest.h>

#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

TEST(AutodiffFdNormRandom, BatchNormalizationTraining) {
  Random rnd(45);
  for (int k = 0; k < 6; ++k) {
    const auto rank = static_cast<size_t>(2 + k % 3);
    const int64_t n = rnd.uniform(2, 3), c = rnd.uniform(1, 3);
    const Shape x = nc(n, c, rnd.shape(static_cast<int64_t>(rank) - 2, 1, 3));
    const auto eps = static_cast<float>(rnd.real(1e-5, 1e-1));
    check({"BatchNorm_training_" + str(x), {x, {c}, {c}}, x, [=](GradBuilder& g, P p) {
             ir::Value* mean = g.filled(0.2, f64({c}));
             ir::Value* var = g.filled(1.5, f64({c}));
             return g.op("BatchNormalization", {p[0], p[1], p[2], mean, var}, f64(x),
                         attrs(Attribute::make_float("epsilon", eps),
                               Attribute::make_int("training_mode", 1)));
           }});
  }
}

TEST(AutodiffFdNormRandom, LayerNormalization) {
  Random rnd(46);
  for (int k = 0; k < 6; ++k) {
    const Shape x = rnd.shape(rnd.uniform(1, 3), 2, 3);
    const auto rank = static_cast<int64_t>(x.size());
    const int64_t axis = rnd.uniform(-rank, rank - 1);
    const auto first = static_cast<std::ptrdiff_t>(axis < 0 ? axis + rank : axis);
    // Scale and bias: the normalised shape or a suffix of it (broadcast).
    const Shape normalized(x.begin() + first, x.end());
    const Shape scale(
        normalized.begin() + rnd.uniform(0, static_cast<int64_t>(normalized.size()) - 1),
        normalized.end());
    const bool bias = rnd.coin();
    std::vector<Shape> params = {x, scale};
    if (bias) params.push_back(scale);
    const auto eps = static_cast<float>(rnd.real(1e-5, 1e-1));
    check({"LayerNorm_" + str(x) + "_axis" + std::to_string(axis) + "_scale" + str(scale) +
               (bias ? "_bias" : ""),
           params, x, [=](GradBuilder& g, P p) {
             return g.op(
                 "LayerNormalization", p, f64(x),
                 attrs(Attribute::make_int("axis", axis), Attribute::make_float("epsilon", eps)));
           }});
  }
}

TEST(AutodiffFdNormRandom, LpNormalization) {
  Random rnd(48);
  for (int k = 0; k < 8; ++k) {
    const Shape x = rnd.shape(rnd.uniform(1, 3), 2, 4);
    const auto rank = static_cast<int64_t>(x.size());
    const int64_t axis = rnd.uniform(-rank, rank - 1);
    const int64_t p = 1 + k % 2;
    check({"LpNorm_" + str(x) + "_axis" + std::to_string(axis) + "_p" + std::to_string(p),
           {x},
           x,
           [=](GradBuilder& g, P in) {
             return g.op("LpNormalization", in, f64(x),
                         attrs(Attribute::make_int("axis", axis), Attribute::make_int("p", p)));
           }});
  }
}

TEST(AutodiffFdNormRandom, GlobalAveragePool) {
  Random rnd(47);
  for (int64_t spatial = 1; spatial <= 3; ++spatial) {
    const Shape in = rnd.shape(spatial, 1, 3);
    const int64_t n = rnd.uniform(1, 2), c = rnd.uniform(1, 2);
    const Shape x = nc(n, c, in);
    const Shape y = nc(x[0], x[1], Shape(static_cast<size_t>(spatial), 1));
    check({"GlobalAveragePool_" + str(x), {x}, y, [=](GradBuilder& g, P p) {
             return g.op("GlobalAveragePool", p, f64(y));
           }});
  }
}

}  // namespace
}  // namespace ampc
