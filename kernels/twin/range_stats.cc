#include "kernels/twin/range_stats.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/shared/range_stats.h"

namespace ampc::kernels::twin {
namespace {

namespace rs = kernels::range_stats;

float load(DType dtype, const void* x, int64_t i) {
  switch (dtype) {
    case DType::kFloat16:
      return rs::fp16_bits_to_float(static_cast<const uint16_t*>(x)[i]);
    case DType::kBFloat16:
      return rs::bf16_bits_to_float(static_cast<const uint16_t*>(x)[i]);
    default:
      return static_cast<const float*>(x)[i];
  }
}

}  // namespace

void range_stats(DType dtype, const void* x, int64_t numel, const void* enabled,
                 const void* scale_ptr, void* out_ptr, void* workspace) {
  if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16)
    throw std::invalid_argument("range_stats: unsupported dtype " + std::string(dtype_name(dtype)));
  auto* out = static_cast<double*>(out_ptr);
  // The kernel's first step: the workspace zeroed (a memset on the stream).
  auto* counters = static_cast<unsigned long long*>(workspace);
  auto* bits = reinterpret_cast<uint32_t*>(counters + rs::kWorkCounters);
  std::memset(workspace, 0, rs::kWorkBytes);
  const bool on = !enabled || *static_cast<const bool*>(enabled);
  const float scale = scale_ptr ? *static_cast<const float*>(scale_ptr) : 1.0f;
  if (on) {
    const int blocks = rs::blocks_for(numel);
    const int64_t stride = static_cast<int64_t>(blocks) * rs::kThreads;
    for (int b = 0; b < blocks; ++b) {  // one block: shared counts, then atomics
      unsigned long long shared[rs::kWorkCounters] = {};
      uint32_t max_bits = 0, inv_min_bits = 0;
      for (int t = 0; t < rs::kThreads; ++t) {
        for (int64_t i = static_cast<int64_t>(b) * rs::kThreads + t; i < numel; i += stride) {
          const rs::ElementBins e = rs::bin_element(load(dtype, x, i), scale);
          ++shared[e.true_class];
          ++shared[rs::kClasses + e.scaled_class];
          if (e.bin < 0) continue;
          ++shared[2 * rs::kClasses + e.bin];
          max_bits = std::max(max_bits, shared::to_bits(e.abs));
          inv_min_bits = std::max(inv_min_bits, ~shared::to_bits(e.abs));
        }
      }
      for (int k = 0; k < rs::kWorkCounters; ++k) counters[k] += shared[k];
      bits[0] = std::max(bits[0], max_bits);
      bits[1] = std::max(bits[1], inv_min_bits);
    }
  }
  // The finishing kernel.
  if (!on) {
    std::fill(out, out + rs::kSize, 0.0);
    return;
  }
  rs::finish(counters, bits[0], bits[1], numel, scale, out);
}

}  // namespace ampc::kernels::twin
