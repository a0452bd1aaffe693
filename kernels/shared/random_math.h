// The random-number ops' draws (RandomUniform, RandomNormal and their *Like forms: nn.RReLU's
// slopes, a VAE's torch.randn_like noise), element by element, on the counter-based draws of
// dropout_math.h, so that a step's values depend only on its key and the element's index (any
// thread order, the same values; a resumed run draws what an uninterrupted one drew). One
// definition for the CPU op (runtime/cpu/ops/random_ops.cc) and a future CUDA kernel.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/shared/dropout_math.h"
#include "kernels/shared/hd.h"

namespace ampc::kernels::shared {

// Element i of a uniform draw in [low, high).
AMPC_HD double uniform_value(uint64_t key, uint64_t i, double low, double high) {
  return low + (high - low) * uniform_at(key, i);
}

// Element i of a normal draw: Box-Muller on the uniform draws 2i and 2i + 1 (1 - u keeps the
// logarithm's argument in (0, 1]).
AMPC_HD double normal_value(uint64_t key, uint64_t i, double mean, double scale) {
  const double u = 1.0 - uniform_at(key, 2 * i), v = uniform_at(key, 2 * i + 1);
  return mean + scale * std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
}

}  // namespace ampc::kernels::shared
