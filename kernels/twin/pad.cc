// CPU twin of kernels/cuda/pad.cu: index_math.h's pad_offset for every output element.
#include "kernels/twin/pad.h"

#include <string>

#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::twin {

namespace sh = ampc::kernels::shared;

void pad(DType dtype, const void* in, const std::vector<int64_t>& in_shape,
         const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end, PadMode mode,
         const void* value, float fill_value, void* out) {
  const sh::dm::PadLayout l =
      sh::dm::make_pad_layout(in_shape, pads_begin, pads_end, static_cast<int32_t>(mode));
  int64_t numel = 1;
  for (int d = 0; d < l.rank; ++d) numel *= l.out_shape[d];
  const uint64_t fill = sh::fill_bits(dtype, fill_value);
  sh::visit_bits(dtype, "pad", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* x = static_cast<const U*>(in);
    U* y = static_cast<U*>(out);
    const U v = value ? *static_cast<const U*>(value) : static_cast<U>(fill);
    for (int64_t i = 0; i < numel; ++i) {
      const int64_t s = sh::dm::pad_offset(l, i);
      y[i] = s < 0 ? v : x[s];
    }
  });
}

}  // namespace ampc::kernels::twin
