// Which loops compute a row twin's f32 rows (layernorm.h, softmax.h): the CPU's widest, AVX-512
// where it has it, or the generic ones, which tests compare with them bit for bit. Other
// dtypes run the generic loops.
#pragma once

namespace ampc::kernels::twin {

enum class RowLoops { kBest, kGeneric };

}  // namespace ampc::kernels::twin
