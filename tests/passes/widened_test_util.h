// What the tests of the folded widening Casts (widened_loss_scores, widened_row_grads) share,
// beside cuda_rewrite_test_util.h's graph inputs and CPU run: whether a graph still has a Cast,
// host tensors of f32 / f16 / bf16 values, and float parameters (model initializers, trained).
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/half.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/tensor.h"
#include "tests/passes/cuda_rewrite_test_util.h"

namespace ampc::passes::test_util {

inline bool has_cast(const ir::Model& model) {
  for (const auto& n : model.graph->nodes) {
    if (n->op_type == "Cast") return true;
  }
  return false;
}

// v rounded to float, then to t (float32, float16 or bfloat16).
inline rt::Tensor float_tensor(DType t, const std::vector<double>& v, std::vector<int64_t> shape) {
  rt::Tensor x(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (t == DType::kBFloat16) {
      x.data<BFloat16>()[i] = float_to_bf16(f);
    } else if (t == DType::kFloat16) {
      x.data<Half>()[i] = float_to_half(f);
    } else {
      x.data<float>()[i] = f;
    }
  }
  return x;
}

// A float32 model initializer (a parameter training updates).
inline ir::Value* add_float_param(ir::Graph& g, const std::string& name, std::vector<int64_t> dims,
                                  const std::vector<float>& values) {
  ir::Value* v = g.add_value(name, {DType::kFloat32, dims});
  ir::Tensor init;
  init.name = name;
  init.dtype = DType::kFloat32;
  init.dims = std::move(dims);
  init.bytes.resize(values.size() * sizeof(float));
  std::memcpy(init.bytes.data(), values.data(), init.bytes.size());
  v->initializer = std::make_unique<ir::Tensor>(std::move(init));
  v->from_model = true;
  g.initializers.push_back(v);
  return v;
}

}  // namespace ampc::passes::test_util
