// Strided and contiguous copies (copy.h). One kernel walks a merged layout (index_math.h) with
// a grid-stride loop; when the innermost dimension is contiguous on both sides and sizes and
// pointers allow, elements are grouped into 16-, 8- or 4-byte words first, so that slices,
// concatenation and splits move 128 bits per load and store. Transposes (the destination
// contiguous along the last dimension, the source along another one) go through 32 x 32 tiles
// in shared memory, so that both reads and writes are coalesced.
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/cuda/copy.h"
#include "kernels/cuda/data_launch.cuh"
#include "kernels/shared/elementwise_dispatch.h"
#include "kernels/shared/index_math.h"

namespace ampc::kernels::cuda {

namespace sh = ampc::kernels::shared;
namespace dm = ampc::kernels::shared::dm;
using detail::grid_for;

namespace {

template <typename U, typename I>
__global__ void strided_copy_kernel(dm::Layout<2> l, const U* __restrict__ src,
                                    U* __restrict__ dst) {
  AMPC_GRID_STRIDE(I, i, l.numel) {
    int64_t off[2];
    dm::layout_offsets(l, i, off);
    dst[off[1]] = src[off[0]];
  }
}

// Bytes [0, vec * 16) as 16-byte words, the tail byte by byte.
__global__ void contiguous_copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                       int64_t vec, const uint8_t* __restrict__ src_tail,
                                       uint8_t* __restrict__ dst_tail, int64_t tail) {
  AMPC_GRID_STRIDE(int64_t, i, vec) dst[i] = src[i];
  AMPC_GRID_STRIDE(int64_t, i, tail) dst_tail[i] = src_tail[i];
}

template <typename U>
__global__ void fill_kernel(U value, U* __restrict__ dst, int64_t numel) {
  AMPC_GRID_STRIDE(int64_t, i, numel) dst[i] = value;
}

// Transpose tiles: dimension p (source stride 1) and the last dimension (destination stride
// 1) of every index of the other ("batch") dimensions. A block of 32 x 8 threads reads a tile
// along p and writes it along the last dimension.
constexpr int kTile = 32, kTileRows = 8;

struct TransposeShape {
  int64_t rows, cols;            // extents of dimension p and of the last dimension
  int64_t src_col, dst_row;      // source stride of the last dim, destination stride of p
  int64_t row_tiles, col_tiles;  // tiles per batch index
  dm::Layout<2> batch;           // the other dimensions: source and destination strides
};

template <typename U>
__global__ void __launch_bounds__(kTile* kTileRows)
    transpose_kernel(TransposeShape t, const U* __restrict__ src, U* __restrict__ dst) {
  __shared__ U tile[kTile][kTile + 1];
  const int64_t tiles = t.row_tiles * t.col_tiles;
  for (int64_t k = blockIdx.x; k < tiles * t.batch.numel; k += gridDim.x) {
    const int64_t b = k / tiles, in_batch = k - b * tiles;
    const int64_t r0 = (in_batch / t.col_tiles) * kTile, c0 = (in_batch % t.col_tiles) * kTile;
    int64_t off[2];
    dm::layout_offsets(t.batch, b, off);
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t r = r0 + threadIdx.x, c = c0 + j;
      if (r < t.rows && c < t.cols) tile[j][threadIdx.x] = src[off[0] + r + c * t.src_col];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {
      const int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < t.rows && c < t.cols) dst[off[1] + r * t.dst_row + c] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

// The tiled form of a layout, when it is a transpose (see above).
bool as_transpose(const dm::Layout<2>& l, TransposeShape* t) {
  const int last = l.rank - 1;
  if (l.rank < 2 || l.stride[1][last] != 1 || l.stride[0][last] == 1) return false;
  int p = -1;
  for (int d = 0; d < last && p < 0; ++d) {
    if (l.stride[0][d] == 1) p = d;
  }
  if (p < 0 || l.shape[p] < 8 || l.shape[last] < 8) return false;  // thin: the generic kernel
  t->rows = l.shape[p];
  t->cols = l.shape[last];
  t->src_col = l.stride[0][last];
  t->dst_row = l.stride[1][p];
  t->row_tiles = (t->rows + kTile - 1) / kTile;
  t->col_tiles = (t->cols + kTile - 1) / kTile;
  t->batch = dm::Layout<2>();
  for (int d = 0; d < last; ++d) {
    if (d == p) continue;
    const int i = t->batch.rank++;
    t->batch.shape[i] = l.shape[d];
    t->batch.stride[0][i] = l.stride[0][d];
    t->batch.stride[1][i] = l.stride[1][d];
    t->batch.numel *= l.shape[d];
  }
  return true;
}

template <typename U>
void launch_transpose(const TransposeShape& t, const void* src, void* dst, cudaStream_t stream) {
  const int64_t blocks = t.row_tiles * t.col_tiles * t.batch.numel;
  const unsigned grid =
      static_cast<unsigned>(blocks < detail::kMaxBlocks ? blocks : detail::kMaxBlocks);
  transpose_kernel<U><<<grid, dim3(kTile, kTileRows), 0, stream>>>(t, static_cast<const U*>(src),
                                                                   static_cast<U*>(dst));
  detail::check_launch("strided_copy (transpose)");
}

template <typename U>
void launch_strided(const dm::Layout<2>& l, const void* src, void* dst, cudaStream_t stream) {
  const unsigned grid = grid_for(l.numel);
  if (l.numel < (int64_t(1) << 31)) {
    strided_copy_kernel<U, uint32_t><<<grid, detail::kThreads, 0, stream>>>(
        l, static_cast<const U*>(src), static_cast<U*>(dst));
  } else {
    strided_copy_kernel<U, int64_t><<<grid, detail::kThreads, 0, stream>>>(
        l, static_cast<const U*>(src), static_cast<U*>(dst));
  }
  detail::check_launch("strided_copy");
}

// Whether the layout may move words of `factor` elements: innermost strides 1 on both sides,
// innermost extent and every other stride multiples of factor, pointers aligned to the word.
bool can_group(const dm::Layout<2>& l, int64_t factor, const void* src, const void* dst,
               int64_t word) {
  if (l.rank == 0 || l.stride[0][l.rank - 1] != 1 || l.stride[1][l.rank - 1] != 1) return false;
  if (l.shape[l.rank - 1] % factor) return false;
  for (int d = 0; d + 1 < l.rank; ++d) {
    if (l.stride[0][d] % factor || l.stride[1][d] % factor) return false;
  }
  return reinterpret_cast<uintptr_t>(src) % word == 0 &&
         reinterpret_cast<uintptr_t>(dst) % word == 0;
}

dm::Layout<2> grouped(dm::Layout<2> l, int64_t factor) {
  l.shape[l.rank - 1] /= factor;
  for (int d = 0; d + 1 < l.rank; ++d) {
    l.stride[0][d] /= factor;
    l.stride[1][d] /= factor;
  }
  l.numel /= factor;
  return l;
}

}  // namespace

void strided_copy(DType dtype, const std::vector<int64_t>& shape, const void* src,
                  int64_t src_offset, const std::vector<int64_t>& src_strides, void* dst,
                  int64_t dst_offset, const std::vector<int64_t>& dst_strides,
                  cudaStream_t stream) {
  sh::visit_bits(dtype, "strided_copy", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const dm::Layout<2> l = dm::make_layout<2>(shape, {src_strides, dst_strides}, "strided_copy");
    if (l.numel == 0) return;
    const U* s = static_cast<const U*>(src) + src_offset;
    U* d = static_cast<U*>(dst) + dst_offset;
    TransposeShape t;
    if (as_transpose(l, &t)) return launch_transpose<U>(t, s, d, stream);
    constexpr int64_t b = sizeof(U);
    if (b < 16 && can_group(l, 16 / b, s, d, 16))
      return launch_strided<uint4>(grouped(l, 16 / b), s, d, stream);
    if (b < 8 && can_group(l, 8 / b, s, d, 8))
      return launch_strided<uint2>(grouped(l, 8 / b), s, d, stream);
    if (b < 4 && can_group(l, 4 / b, s, d, 4))
      return launch_strided<uint32_t>(grouped(l, 4 / b), s, d, stream);
    launch_strided<U>(l, s, d, stream);
  });
}

void contiguous_copy(DType dtype, const void* src, void* dst, int64_t numel, cudaStream_t stream) {
  sh::visit_bits(dtype, "contiguous_copy", [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (numel <= 0) return;
    const int64_t bytes = numel * static_cast<int64_t>(sizeof(U));
    const bool aligned =
        reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0;
    if (!aligned) {
      // Misaligned views (an odd slice offset): element by element.
      strided_copy(dtype, {numel}, src, 0, {1}, dst, 0, {1}, stream);
      return;
    }
    const int64_t vec = bytes / 16, tail = bytes - vec * 16;
    contiguous_copy_kernel<<<grid_for(vec > tail ? vec : tail), detail::kThreads, 0, stream>>>(
        static_cast<const uint4*>(src), static_cast<uint4*>(dst), vec,
        static_cast<const uint8_t*>(src) + vec * 16, static_cast<uint8_t*>(dst) + vec * 16, tail);
    detail::check_launch("contiguous_copy");
  });
}

void fill(DType dtype, const void* value, void* dst, int64_t numel, cudaStream_t stream) {
  sh::visit_bits(dtype, "fill", [&](auto tag) {
    using U = typename decltype(tag)::type;
    if (numel <= 0) return;
    U bits;
    std::memcpy(&bits, value, sizeof(U));
    fill_kernel<<<grid_for(numel), detail::kThreads, 0, stream>>>(bits, static_cast<U*>(dst),
                                                                  numel);
    detail::check_launch("fill");
  });
}

void concat(DType dtype, const std::vector<const void*>& inputs,
            const std::vector<int64_t>& axis_sizes, int64_t outer, int64_t inner, void* out,
            cudaStream_t stream) {
  sh::dm::for_each_joined_part(
      "concat", "inputs", inputs.size(), axis_sizes, inner,
      [&](size_t k, int64_t row, int64_t offset, int64_t joined) {
        strided_copy(dtype, {outer, row}, inputs[k], 0, {row, 1}, out, offset, {joined, 1}, stream);
      });
}

void split(DType dtype, const void* in, int64_t outer, int64_t inner,
           const std::vector<int64_t>& axis_sizes, const std::vector<void*>& outputs,
           cudaStream_t stream) {
  sh::dm::for_each_joined_part("split", "outputs", outputs.size(), axis_sizes, inner,
                               [&](size_t k, int64_t row, int64_t offset, int64_t joined) {
                                 if (outputs[k])
                                   strided_copy(dtype, {outer, row}, in, offset, {joined, 1},
                                                outputs[k], 0, {row, 1}, stream);
                               });
}

}  // namespace ampc::kernels::cuda
