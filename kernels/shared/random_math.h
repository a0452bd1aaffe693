// The random-number ops' draws (RandomUniform, RandomNormal and their *Like forms: nn.RReLU's
// slopes, a VAE's torch.randn_like noise), element by element, on the counter-based draws of
// dropout_math.h, so that a step's values depend only on its key and the element's index (any
// thread order, the same values; a resumed run draws what an uninterrupted one drew). One
// definition for the CPU op (runtime/cpu/ops/random_ops.cc) and the CUDA kernel
// (kernels/cuda/random.cu).
//
// The draws are computed in double and rounded once to the output's math type (float for the
// 16-bit types), then to the output type. The uniform draw is exact arithmetic on both
// backends; the normal one calls the platform's double log and cos (glibc's on the CPU,
// libdevice's on the GPU), which may differ in the last bit of the double, so a device value
// can differ from the CPU's by one unit in the last place of the output type, on about one
// element in 2^28 for float.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/shared/dropout_math.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared {

// Element i of a uniform draw in [low, high). (add / sub / mul: each operation rounded on its
// own on both backends, never contracted into a fused multiply-add.)
AMPC_HD double uniform_value(uint64_t key, uint64_t i, double low, double high) {
  return add(low, mul(sub(high, low), uniform_at(key, i)));
}

// Element i of a normal draw: Box-Muller on the uniform draws 2i and 2i + 1 (1 - u keeps the
// logarithm's argument in (0, 1]).
AMPC_HD double normal_value(uint64_t key, uint64_t i, double mean, double scale) {
  const double u = 1.0 - uniform_at(key, 2 * i), v = uniform_at(key, 2 * i + 1);
  const double radius = std::sqrt(mul(-2.0, std::log(u)));
  return add(mean, mul(mul(scale, radius), std::cos(mul(6.283185307179586, v))));
}

// The key of an op with a `seed` attribute (a float in ONNX): the same draws at every step.
inline uint64_t seed_key(float seed) {
  return static_cast<uint64_t>(static_cast<int64_t>(seed));
}

// Which draw, and its two parameters: (low, high) for a uniform draw, (mean, scale) for a
// normal one, as the ops' attributes name them.
struct RandomDraw {
  bool normal = false;
  double a = 0, b = 1;
  AMPC_HD double at(uint64_t key, uint64_t i) const {
    return normal ? normal_value(key, i, a, b) : uniform_value(key, i, a, b);
  }
};

// Element i of a random op's output y (f32, f64, f16, bf16) under `key`.
template <typename T>
struct RandomElement {
  T* y;
  uint64_t key;
  RandomDraw draw;
  AMPC_HD void operator()(int64_t i) const {
    using M = typename Elem<T>::Math;
    y[i] = Elem<T>::store(static_cast<M>(draw.at(key, static_cast<uint64_t>(i))));
  }
};

}  // namespace ampc::kernels::shared
