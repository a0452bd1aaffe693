// Pad (pad.h): one thread per output element (grid-stride) maps it to its source with
// index_math.h's pad_offset, or writes the constant.
#include <cstdint>

#include "kernels/cuda/data_launch.cuh"
#include "kernels/cuda/pad.h"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;

namespace {

// value: the constant on the device (may be null: then fill, the converted attribute).
template <typename U>
__global__ void pad_kernel(dm::PadLayout l, int64_t numel, const U* __restrict__ in,
                           const U* __restrict__ value, U fill, U* __restrict__ out) {
  const U v = value ? *value : fill;
  AMPC_GRID_STRIDE(int64_t, i, numel) {
    const int64_t s = dm::pad_offset(l, i);
    out[i] = s < 0 ? v : in[s];
  }
}

}  // namespace

void pad(DType dtype, const void* in, const std::vector<int64_t>& in_shape,
         const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end, PadMode mode,
         const void* value, float fill_value, void* out, cudaStream_t stream) {
  const dm::PadLayout l =
      dm::make_pad_layout(in_shape, pads_begin, pads_end, static_cast<int32_t>(mode));
  int64_t numel = 1;
  for (int d = 0; d < l.rank; ++d) numel *= l.out_shape[d];
  const uint64_t fill = sh::fill_bits(dtype, fill_value);
  sh::visit_bits(dtype, "pad", [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (numel == 0) return;
    pad_kernel<U><<<detail::grid_for(numel), detail::kThreads, 0, stream>>>(
        l, numel, static_cast<const U*>(in), static_cast<const U*>(value), static_cast<U>(fill),
        static_cast<U*>(out));
    detail::check_launch("pad");
  });
}

}  // namespace ampc::kernels::cuda
