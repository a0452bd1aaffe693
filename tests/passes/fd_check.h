// Finite-difference checking of gradient rules in fp64 (see fd_check.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::fd {

using Shape = std::vector<int64_t>;
using Values = std::vector<std::vector<double>>;
// Builds the op under test from the parameters (f64 initializers p0, p1, ...); returns its
// output, whose shape is Case::out. Constants it makes with the builder are not trained.
using Build = std::function<ir::Value*(passes::autodiff::GradBuilder&, const std::vector<ir::Value*>&)>;

struct Case {
  std::string name;
  std::vector<Shape> params;
  Shape out;
  Build build;
  double lo = -1.5, hi = 1.5;  // parameter value range
};

// loss = ReduceSum(y * R) with fixed random R; every element of every parameter's
// gradient from the autodiff pass (run on the CPU backend) must match the central
// difference (loss(p + h) - loss(p - h)) / 2h. Reports through GoogleTest.
void check(const Case& c);

// The model check() builds, for tests that need it (e.g. error cases).
std::unique_ptr<ir::Model> make_model(const Case& c, const Values& values, const std::vector<double>& r);

inline ir::TensorType f64(Shape s) { return {DType::kFloat64, std::move(s)}; }

}  // namespace ampc::fd
