// MaxPoolGrad's argmax on AVX-512, for f32 and bf16 planes: sixteen outputs side by side, each
// lane walking its window's taps in argmax_window's order (pool_math.h) through a table of
// offsets, the taps read by masked gathers. The first in-image tap is taken as it is and each
// later one where it is greater (an ordered compare: a NaN never wins, a NaN first tap stays),
// so every lane picks argmax_window's first maximum; each output's dy is then added to its
// argmax in increasing output order, the order in which the kernels' per-dx-element gathers add.
// The same bits as the generic loops of pool.cc (tests/unit/twin_data_test.cc, also run with
// AMPC_NO_AVX512=1). The scalar walk costs a few cycles per tap (three or four dependent steps
// each, the window's bounds per output); the gathers take sixteen taps per instruction.
#pragma once

#include <cstdint>
#include <vector>

namespace ampc::kernels::twin {

// Every output's window as spatial offsets: offset[k * padded + o] is output o's k-th tap
// inside the image in argmax_window's order, -1 past its last (taps: the kernel's size, the
// most any window has). padded: the outputs rounded up to 16 (those past the end have none).
struct TapTable {
  int64_t outputs = 0, padded = 0, taps = 0;
  std::vector<int32_t> offset;
};

// AVX512F, BW and VL present and AMPC_NO_AVX512 unset (base/cpu_features.h).
bool pool_avx512_available();

// dx of one plane (`image` elements, f32 or, with bf16, bf16 bits) from x and dy of that plane:
// dx[argmax of output o] += dy[o] for o in increasing order, summed in f32 and stored once.
// scratch: 2 * image floats; arg: taps.padded ints.
void max_pool_grad_plane_avx512(const TapTable& taps, bool bf16, int64_t image, const void* x,
                                const void* dy, void* dx, float* scratch, int32_t* arg);

}  // namespace ampc::kernels::twin
