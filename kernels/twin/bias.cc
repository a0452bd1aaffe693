#include "kernels/twin/bias.h"

#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::twin {

namespace sh = kernels::shared;

void add_channel_bias(DType dtype, void* y, const void* b, int64_t n, int64_t c, int64_t spatial) {
  sh::dispatch_float_types(dtype, "add_channel_bias", [&](auto tag) {
    using T = decltype(tag);
    T* yt = static_cast<T*>(y);
    const T* bt = static_cast<const T*>(b);
    for (int64_t pl = 0; pl < n * c; ++pl) {
      const float bv = sh::load_f(bt, pl % c);
      for (int64_t j = 0; j < spatial; ++j)
        sh::store_f(yt, pl * spatial + j, sh::add(sh::load_f(yt, pl * spatial + j), bv));
    }
  });
}

}  // namespace ampc::kernels::twin
