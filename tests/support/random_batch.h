// A pseudo-random batch for a plan's inputs, for tests that train the bundled models: floats in
// [0, 1), integer labels in [0, 10); with `poison`, float element 7 of each float input is that
// value (inf or NaN: a step the skip-step must reject).
#pragma once

#include <map>
#include <optional>
#include <random>
#include <string>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::test {

inline std::map<std::string, rt::Tensor> random_batch(const plan::Plan& p, unsigned seed,
                                                      std::optional<float> poison = {}) {
  std::mt19937 rng(seed);
  std::map<std::string, rt::Tensor> batch;
  for (const auto& binding : p.inputs()) {
    const auto& b = p.buffers(binding.buffer());
    rt::Tensor t(static_cast<DType>(b.dtype()), {b.shape().begin(), b.shape().end()});
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::kFloat32) {
        t.data<float>()[i] = std::uniform_real_distribution<float>(0, 1)(rng);
      } else {
        t.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(0, 9)(rng);
      }
    }
    if (poison && t.dtype() == DType::kFloat32) t.data<float>()[7] = *poison;
    batch[binding.name()] = std::move(t);
  }
  return batch;
}

}  // namespace ampc::test
