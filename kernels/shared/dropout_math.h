// Dropout, element by element, for the CUDA kernel (kernels/cuda/dropout.cu), its CPU twin
// (kernels/twin/dropout.cc, which is also the CPU backend's Dropout) and the two executors'
// random keys (runtime/cpu/executor.cc, runtime/cuda/executor.cc): one definition each, so a
// plan draws the same masks on either backend.
//
// The draws are counter-based: element i's draw under a key is SplitMix64's output for the
// key's (i + 1)-th state, so it needs none of the draws before it (a thread per element, in
// any order, gives the same mask). A plan step's key is mixed from the run's key and the
// step's index in the plan; a run's key from the executor's seed and the number of runs it
// has done, so a resumed run (runs done = steps done) draws what an uninterrupted one drew.
#pragma once

#include <cstdint>

#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared {

// SplitMix64's finaliser: a well-mixed 64-bit word from a structured one.
AMPC_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of one run: the executor's seed and the runs it did before this one.
AMPC_HD uint64_t run_key(uint64_t seed, int64_t runs_done) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(runs_done)));
}

// The key of plan step `step` within the run keyed `run`.
AMPC_HD uint64_t step_key(uint64_t run, int64_t step) {
  return mix64(run + static_cast<uint64_t>(step));
}

// Element i's uniform draw in [0, 1) under `key`: the top 53 bits of SplitMix64's output for
// its (i + 1)-th state.
AMPC_HD double uniform_at(uint64_t key, uint64_t i) {
  return static_cast<double>(mix64(key + (i + 1) * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
}

// Where a Dropout step's key comes from: `fixed` (the op's `seed` attribute) when `run` is
// null, else step_key(*run, step), `run` pointing at the run's key, which the executor writes
// before each run (on the GPU a word of device memory, so that a captured graph replays with
// each run's key).
struct DropoutKey {
  const uint64_t* run = nullptr;
  int64_t step = 0;
  uint64_t fixed = 0;
  AMPC_HD uint64_t get() const { return run ? step_key(*run, step) : fixed; }
};

// Element i of Dropout in training mode: kept where uniform_at(key, i) >= ratio, then
// y = x * scale (scale = 1 / (1 - ratio) in the compute type, one rounding, and one more to
// T), else y = 0; the mask as bool (opset 10 on) or as T's 0 and 1 (earlier opsets), either
// may be null. Outside training mode y = x and the mask is all kept.
template <typename T>
struct DropoutElement {
  using M = typename Elem<T>::Math;
  const T* x;
  T* y;
  bool* mask;
  T* mask_values;
  uint64_t key;
  double ratio;
  M scale;
  bool training;
  AMPC_HD void operator()(int64_t i) const {
    if (training) return drop(i);
    y[i] = x[i];
    if (mask) mask[i] = true;
    if (mask_values) mask_values[i] = Elem<T>::store(M(1));
  }
  // Element i in training mode. Apart from the identity, so that a loop over it has no copy of
  // a 16-bit struct, which keeps GCC from vectorising it (kernels/twin/dropout_avx512.h).
  AMPC_HD void drop(int64_t i) const {
    const bool keep = uniform_at(key, static_cast<uint64_t>(i)) >= ratio;
    y[i] = Elem<T>::store(keep ? mul(Elem<T>::load(x[i]), scale) : M(0));
    if (mask) mask[i] = keep;
    if (mask_values) mask_values[i] = Elem<T>::store(keep ? M(1) : M(0));
  }
};

// The functor of the launch API's arguments (kernels/cuda/dropout.h), its key still to be set:
// the kernel resolves the DropoutKey once per thread (the run key is in device memory), the
// twin once per call.
template <typename T>
DropoutElement<T> dropout_element(const void* x, void* y, bool* mask, void* mask_values,
                                  double ratio, bool training) {
  using M = typename Elem<T>::Math;
  return {static_cast<const T*>(x),
          static_cast<T*>(y),
          mask,
          static_cast<T*>(mask_values),
          0,
          ratio,
          static_cast<M>(1.0 / (1.0 - ratio)),
          training && ratio > 0};
}

}  // namespace ampc::kernels::shared
