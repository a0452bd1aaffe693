// exp_f32 (kernels/shared/float_math.h) over arrays on the CPU's vector units. The build
// targets plain x86-64, so the same loop is compiled three times, for AVX-512, for AVX2 and for
// the base target, by function attributes, and the widest the CPU has is picked at run time.
// exp_f32 is branch-free, so GCC vectorises each loop; every lane runs exp_f32's operations in
// its order with its roundings (this library builds with -ffp-contract=off, so no FMA appears
// where exp_f32 has a multiply and an add), and each path gives the scalar function's bits
// (tests/unit/exp_array_test.cc).
#include "kernels/shared/float_math.h"
#include "kernels/twin/row_host.h"

namespace ampc::kernels::twin {
namespace {

// always_inline: GCC inlines a function of the base target into one built for a wider target
// only when told, and the loop vectorises only with exp_f32 inlined.
[[gnu::always_inline]] inline void exp_loop(const float* x, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = fmath::exp_f32(x[j]);
}

__attribute__((target("avx512f"))) void exp_avx512(const float* x, int64_t n, float* out) {
  exp_loop(x, n, out);
}

__attribute__((target("avx2"))) void exp_avx2(const float* x, int64_t n, float* out) {
  exp_loop(x, n, out);
}

void exp_scalar(const float* x, int64_t n, float* out) {
  exp_loop(x, n, out);
}

using ExpFn = void (*)(const float*, int64_t, float*);

ExpFn exp_for(ExpPath path) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2");
  switch (path) {
    case ExpPath::kBest:
      return avx512 ? exp_avx512 : (avx2 ? exp_avx2 : exp_scalar);
    case ExpPath::kAvx512:
      return avx512 ? exp_avx512 : nullptr;
    case ExpPath::kAvx2:
      return avx2 ? exp_avx2 : nullptr;
    case ExpPath::kScalar:
      return exp_scalar;
  }
  return nullptr;
}

}  // namespace

void exp_array(const float* x, int64_t n, float* out) {
  static const ExpFn fn = exp_for(ExpPath::kBest);
  fn(x, n, out);
}

bool exp_array_on(ExpPath path, const float* x, int64_t n, float* out) {
  const ExpFn fn = exp_for(path);
  if (fn) fn(x, n, out);
  return fn != nullptr;
}

}  // namespace ampc::kernels::twin
