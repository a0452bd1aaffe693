// Finite-difference checking of gradient rules in fp64 (see fd_check.cc).
#pragma once

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::fd {

using Shape = std::vector<int64_t>;
using Values = std::vector<std::vector<double>>;
// Builds the op under test from the parameters (f64 initializers p0, p1, ...); returns its
// output, whose shape is Case::out. Constants it makes with the builder are not trained.
using Build =
    std::function<ir::Value*(passes::autodiff::GradBuilder&, const std::vector<ir::Value*>&)>;

struct Case {
  std::string name;
  std::vector<Shape> params;
  Shape out;
  Build build;
  double lo = -1.5, hi = 1.5;  // parameter value range
  // Points where the op is not differentiable (Relu's 0, Clip's bounds): parameter values
  // within `gap` of one are drawn again, so that x +- h stays on one side.
  std::vector<double> kinks = {};
  double gap = 0.05;
  // Every parameter's values are distinct and at least (hi - lo) / numel apart (a shuffled
  // grid): no ties for MaxPool's argmax.
  bool distinct = false;
};

// Seeded random shapes and choices, so that "random" cases are the same on every run.
class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi);  // in [lo, hi]
  double real(double lo, double hi);
  bool coin() { return uniform(0, 1) == 1; }
  Shape shape(int64_t rank, int64_t lo, int64_t hi);  // each dim in [lo, hi]
  // A shape that numpy-broadcasts to `out`: some leading dims dropped, others set to 1.
  Shape broadcastable_to(const Shape& out);
  // Two shapes whose numpy broadcast is `out`, each dim stretched on either side or
  // neither, leading dims dropped from one of them.
  std::pair<Shape, Shape> broadcast_pair(const Shape& out);
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// [n, c, spatial...]: the layout of Conv, pooling and normalisation inputs.
inline Shape nc(int64_t n, int64_t c, const Shape& spatial) {
  Shape s = {n, c};
  s.insert(s.end(), spatial.begin(), spatial.end());
  return s;
}

// "2x3x1", for case names.
std::string str(const Shape& s);

// loss = ReduceSum(y * R) with fixed random R; every element of every parameter's
// gradient from the autodiff pass (run on the CPU backend) must match the central
// difference (loss(p + h) - loss(p - h)) / 2h. Reports through GoogleTest.
void check(const Case& c);

// The model check() builds, for tests that need it (e.g. error cases).
std::unique_ptr<ir::Model> make_model(const Case& c, const Values& values,
                                      const std::vector<double>& r);

inline ir::TensorType f64(Shape s) {
  return {DType::kFloat64, std::move(s)};
}

// A constant f64 tensor of shape `s` (class weights, ...); not trained, as every constant
// the builder makes.
ir::Value* f64_values(passes::autodiff::GradBuilder& g, const std::vector<double>& v,
                      const Shape& s);

// A constant bool scalar (Dropout's training_mode).
ir::Value* bool_scalar(passes::autodiff::GradBuilder& g, bool b);

// A constant int64 tensor of shape `s` (indices, labels, conditions).
inline ir::Value* int_tensor(passes::autodiff::GradBuilder& g, const std::vector<int64_t>& v,
                             const Shape& s) {
  return g.reshape(g.ints(v), s);
}

}  // namespace ampc::fd
