// Helpers of the CPU operator tests: plan attributes, tensors from doubles, running one
// operator through the registry on a hand-built step, and comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu::optest {

plan::Attribute attr_i(const std::string& name, int64_t v);
plan::Attribute attr_f(const std::string& name, float v);
plan::Attribute attr_s(const std::string& name, const std::string& v);
plan::Attribute attr_ints(const std::string& name, const std::vector<int64_t>& v);
Tensor make(DType dtype, const std::vector<int64_t>& shape, const std::vector<double>& v);
std::vector<double> values(const Tensor& t);
// Runs `op` of `domain` ("" = ONNX) through the CPU registry; undefined tensors are omitted
// inputs. run_error returns the ampc::Error message ("(no error)" when it succeeds).
std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& inputs,
                        const std::vector<plan::Attribute>& attrs, int num_outputs, int64_t opset,
                        const std::string& domain = "");
std::string run_error(const std::string& op, const std::vector<Tensor>& inputs,
                      const std::vector<plan::Attribute>& attrs, int num_outputs, int64_t opset,
                      const std::string& domain = "");
std::vector<double> pseudo_random(size_t n, uint32_t seed);
// The number of elements of a shape.
int64_t count(const std::vector<int64_t>& shape);
// A tensor of pseudo_random values spread over [lo, hi].
Tensor uniform(DType t, const std::vector<int64_t>& shape, uint32_t seed, double lo, double hi);
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol);

}  // namespace ampc::rt::cpu::optest
