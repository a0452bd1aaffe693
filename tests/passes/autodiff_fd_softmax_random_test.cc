// Gradient rules of Softmax, LogSoftmax and the two losses (rules_softmax.cc) against finite
// differences in fp64 on random shapes and axes from a seeded generator (the attribute
// combinations of the losses on fixed shapes are in autodiff_fd_index_softmax_test.cc).
#include <gtest/gtest.h>

#include "tests/passes/fd_check.h"

namespace ampc {
namespace {

using namespace ampc::fd;  // NOLINT: the test speaks the harness vocabulary

using ir::Attribute;
using passes::autodiff::attrs;
using passes::autodiff::GradBuilder;
using P = const std::vector<ir::Value*>&;

TEST(AutodiffFdSoftmaxRandom, AnyAxis) {
  Random rnd(31);
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    for (int k = 0; k < 8; ++k) {
      const Shape s = rnd.shape(rnd.uniform(1, 4), 1, 3);
      const auto rank = static_cast<int64_t>(s.size());
      const int64_t axis = rnd.uniform(-rank, rank - 1);
      check({op + "_" + str(s) + "_axis" + std::to_string(axis), {s}, s, [=](GradBuilder& g, P p) {
               return g.op(op, {p[0]}, f64(s), attrs(Attribute::make_int("axis", axis)));
             }});
    }
  }
}

// Random N, C and extra dims; random labels with some equal to ignore_index; random class
// weights (constants: the rule refuses trainable ones).
TEST(AutodiffFdSoftmaxRandom, Losses) {
  Random rnd(32);
  const std::vector<std::string> reductions = {"mean", "sum", "none"};
  for (const std::string op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    for (int k = 0; k < 8; ++k) {
      const int64_t n = rnd.uniform(1, 3), classes = rnd.uniform(2, 4);
      const Shape extra = rnd.shape(rnd.uniform(0, 2), 1, 2);
      Shape x = {n, classes}, labels = {n};
      x.insert(x.end(), extra.begin(), extra.end());
      labels.insert(labels.end(), extra.begin(), extra.end());
      const int64_t ignore = rnd.coin() ? -100 : rnd.uniform(0, classes - 1);
      std::vector<int64_t> t(static_cast<size_t>(ir::shape_numel(labels)));
      for (int64_t& v : t) v = rnd.uniform(0, 4) == 0 ? ignore : rnd.uniform(0, classes - 1);
      t[0] = ignore == 0 ? 1 : 0;  // at least one label counts (mean divides by its weight)
      std::vector<double> w(static_cast<size_t>(classes));
      for (double& v : w) v = rnd.real(0.5, 2.0);
      const bool weights = rnd.coin();
      const std::string reduction = rnd.pick(reductions);
      const Shape out = reduction == "none" ? labels : Shape{};
      check({op + "_" + str(x) + "_" + reduction + "_ignore" + std::to_string(ignore) +
                 (weights ? "_weights" : ""),
             {x},
             out,
             [=](GradBuilder& g, P p) {
               std::vector<ir::Value*> in = {p[0], int_tensor(g, t, labels)};
               if (weights) in.push_back(f64_values(g, w, {classes}));
               return g.op(op, in, f64(out),
                           attrs(Attribute::make_string("reduction", reduction),
                                 Attribute::make_int("ignore_index", ignore)));
             }});
    }
  }
}

}  // namespace
}  // namespace ampc
