#include "kernels/twin/dropout_avx512.h"

#include "base/cpu_features.h"
#include "base/half.h"

// The element functor is inlined into the loop, which takes this target (GCC inlines a
// function built for plain x86-64 into one built for a superset).
#if defined(__clang__)
#define AMPC_AVX512DQ_LOOP \
  [[gnu::target("avx512f,avx512dq,avx512bw,avx512vl"), clang::min_vector_width(512)]]
#else
#define AMPC_AVX512DQ_LOOP \
  [[gnu::target("avx512f,avx512dq,avx512bw,avx512vl,prefer-vector-width=512")]]
#endif

namespace ampc::kernels::twin {
namespace {

template <typename T>
AMPC_AVX512DQ_LOOP void element_loop(const shared::DropoutElement<T> f, int64_t begin,
                                     int64_t end) {
  for (int64_t i = begin; i < end; ++i) f.drop(i);
}

}  // namespace

template <typename T>
bool dropout_range_avx512(const shared::DropoutElement<T>& f, int64_t begin, int64_t end) {
  if (!f.training || !cpu_has_avx512_dq_bw_vl()) return false;
  element_loop(f, begin, end);
  return true;
}

template bool dropout_range_avx512(const shared::DropoutElement<float>&, int64_t, int64_t);
template bool dropout_range_avx512(const shared::DropoutElement<double>&, int64_t, int64_t);
template bool dropout_range_avx512(const shared::DropoutElement<Half>&, int64_t, int64_t);
template bool dropout_range_avx512(const shared::DropoutElement<BFloat16>&, int64_t, int64_t);

}  // namespace ampc::kernels::twin
