// Elementwise kernels over raw buffers: unary maps, and binary/ternary maps whose operands
// broadcast to the output. `f` takes and returns opmath values (fp32 for the 16-bit floats);
// loads and the single rounding store happen here. Same-shape and scalar operands take plain
// contiguous loops the compiler vectorises; large outputs are split across OpenMP threads.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/bf16_convert.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/elementwise_types.h"

namespace ampc::kernels::cpu {

// Splits [0, n) into chunks run in parallel when n is large: fn(begin, end).
template <typename Fn>
void parallel_range(int64_t n, Fn&& fn) {
  if (n < kParallelThreshold) {
    fn(int64_t{0}, n);
    return;
  }
  constexpr int64_t kChunk = 8192;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// parallel_range over several index spaces at once: [0, sizes[s]) for each s, laid end to end
// and cut into chunks that each stay within one space; fn(s, begin, end). One parallel region
// for all of them (or none when the total is small): a region per space would wake the
// passive threads once per space (a multi-tensor optimizer update has one per parameter).
template <typename Fn>
void parallel_segments(const std::vector<int64_t>& sizes, Fn&& fn) {
  constexpr int64_t kChunk = 8192;
  struct Piece {
    int64_t segment, begin, end;
  };
  std::vector<Piece> pieces;
  int64_t total = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    total += sizes[s];
    for (int64_t b = 0; b < sizes[s]; b += kChunk)
      pieces.push_back({static_cast<int64_t>(s), b, std::min(sizes[s], b + kChunk)});
  }
  const int64_t count = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(static) if (total >= kParallelThreshold)
  for (int64_t i = 0; i < count; ++i) fn(pieces[i].segment, pieces[i].begin, pieces[i].end);
}

// y[i] = store<Out>(value(i)) for i in [0, n). A bf16 output of fp32 values is rounded 16
// lanes at a time (base/bf16_convert.h: base/half.h's rounding, bit for bit) from a block of
// values: for the base x86-64 target GCC leaves the element-by-element rounding scalar, which
// made the bf16 maps (Relu, Add, Where, ...) slower than their fp32 forms.
template <typename Out, typename Value>
inline void store_values(Out* y, int64_t n, Value value) {
  if constexpr (std::is_same_v<Out, BFloat16> &&
                std::is_same_v<decltype(value(int64_t{0})), float>) {
    if (n >= 16 && convert_avx512_available()) {
      constexpr int64_t kBlock = 256;
      float block[kBlock];
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t len = std::min(kBlock, n - i0);
        for (int64_t i = 0; i < len; ++i) block[i] = value(i0 + i);
        f32_to_bf16_avx512(block, reinterpret_cast<uint16_t*>(y + i0), len);
      }
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) y[i] = store<Out>(value(i));
}

template <typename In, typename Out, typename F>
void unary_map(const In* x, Out* y, int64_t n, F f) {
  parallel_range(n, [&](int64_t b, int64_t e) {
    store_values(y + b, e - b, [&](int64_t i) { return f(load(x[b + i])); });
  });
}

// One row of a binary map: the operands advance by sa and sb (0 = broadcast scalar).
template <typename A, typename B, typename Out, typename F>
inline void binary_row(const A* a, int64_t sa, const B* b, int64_t sb, Out* y, int64_t n, F& f) {
  if (sa == 1 && sb == 1) {
    store_values(y, n, [&](int64_t i) { return f(load(a[i]), load(b[i])); });
  } else if (sa == 0 && sb == 1) {
    const auto av = load(a[0]);
    store_values(y, n, [&](int64_t i) { return f(av, load(b[i])); });
  } else if (sa == 1 && sb == 0) {
    const auto bv = load(b[0]);
    store_values(y, n, [&](int64_t i) { return f(load(a[i]), bv); });
  } else {
    store_values(y, n, [&](int64_t i) { return f(load(a[i * sa]), load(b[i * sb])); });
  }
}

// The rows a broadcast map walks: rows over the innermost (collapsed) dimension; a fully
// collapsed walk is cut into chunks so threads can share it. row(first, off, len) for each row:
// y's row starts at `first`, off[k] is operand k's element offset, len its length.
template <size_t K, typename Row>
void for_each_broadcast_row(const BroadcastPlan& p, Row row) {
  const bool flat = p.shape.size() == 1;
  constexpr int64_t kChunk = 8192;
  const int64_t n = flat ? std::min(kChunk, p.inner()) : p.inner();
  const int64_t rows = flat ? (p.inner() + kChunk - 1) / kChunk : p.rows();
#pragma omp parallel for schedule(static) if (p.numel >= kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off[K];
    for (size_t k = 0; k < K; ++k) off[k] = r * n * p.strides[k].back();
    if (!flat) p.row_offsets(r, off);
    row(r * n, off, std::min(n, p.numel - r * n));
  }
}

// y[out_shape] = f(a broadcast, b broadcast).
template <typename A, typename B, typename Out, typename F>
void binary_map(const A* a, const Shape& a_shape, const B* b, const Shape& b_shape, Out* y,
                const Shape& out_shape, F f) {
  const BroadcastPlan p = make_broadcast_plan(out_shape, {a_shape, b_shape});
  if (p.numel == 0) return;
  const int64_t sa = p.strides[0].back(), sb = p.strides[1].back();
  for_each_broadcast_row<2>(p, [&](int64_t first, const int64_t* off, int64_t len) {
    binary_row(a + off[0], sa, b + off[1], sb, y + first, len, f);
  });
}

// y[out_shape] = f(a, b, c), all three broadcast (Where).
template <typename A, typename B, typename C, typename Out, typename F>
void ternary_map(const A* a, const Shape& a_shape, const B* b, const Shape& b_shape, const C* c,
                 const Shape& c_shape, Out* y, const Shape& out_shape, F f) {
  const BroadcastPlan p = make_broadcast_plan(out_shape, {a_shape, b_shape, c_shape});
  if (p.numel == 0) return;
  const int64_t sa = p.strides[0].back(), sb = p.strides[1].back(), sc = p.strides[2].back();
  for_each_broadcast_row<3>(p, [&](int64_t first, const int64_t* off, int64_t len) {
    const A* ar = a + off[0];
    const B* br = b + off[1];
    const C* cr = c + off[2];
    store_values(y + first, len, [&](int64_t i) {
      return f(load(ar[i * sa]), load(br[i * sb]), load(cr[i * sc]));
    });
  });
}

// The bits of a 16-bit float as its fp32 round trip leaves them (base/half.h: a NaN gets its
// quiet bit, every other value stays): what the fused kernels and the CUDA kernels, which
// compute in fp32, store for a NaN they pass through. Other types: the bits as they are.
template <typename T, typename U>
inline U quiet_16bit_nan(U u) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    constexpr U exponent = std::is_same_v<T, Half> ? 0x7c00 : 0x7f80;
    constexpr U quiet = std::is_same_v<T, Half> ? 0x0200 : 0x0040;
    // A NaN's magnitude bits exceed the infinity's; one compare, no branch, so that the loops
    // calling this vectorise.
    const U nan = static_cast<U>((u & 0x7fff) > exponent);
    return static_cast<U>(u | (static_cast<U>(U{0} - nan) & quiet));
  }
  return u;
}

// y[out_shape] = c ? a : b (Where), all three broadcast, by the elements' bits: the mask picks
// through an AND with all ones or zeros, not a branch. A Relu's backward mask is true at
// random about half the time, and the branch GCC made of `c ? a : b` mispredicted on every
// other element (resnet18's first Where, 524288 elements: 1.4 ms). 16-bit floats are not
// widened and rounded back; a NaN among them is quieted as that round trip would.
template <typename T>
void select_map(const bool* c, const Shape& c_shape, const T* a, const Shape& a_shape, const T* b,
                const Shape& b_shape, T* y, const Shape& out_shape) {
  static_assert(std::is_trivially_copyable_v<T>);
  using U = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  const BroadcastPlan p = make_broadcast_plan(out_shape, {c_shape, a_shape, b_shape});
  if (p.numel == 0) return;
  const int64_t sc = p.strides[0].back(), sa = p.strides[1].back(), sb = p.strides[2].back();
  // The elements as their bits, read and written through a may_alias integer type, and the
  // mask as bytes: GCC vectorises neither a loop that copies a struct (Half, BFloat16) whole, nor
  // a bit_cast of a float load, nor the widening of a bool.
  typedef U __attribute__((__may_alias__)) Bits;
  const auto* cb = reinterpret_cast<const uint8_t*>(c);
  const auto* ab = reinterpret_cast<const Bits*>(a);
  const auto* bb = reinterpret_cast<const Bits*>(b);
  auto* yb = reinterpret_cast<Bits*>(y);
  auto pick = [](uint8_t m, U x, U z) {
    const U all = static_cast<U>(U{0} - static_cast<U>(m));
    return quiet_16bit_nan<T>(static_cast<U>((x & all) | (z & static_cast<U>(~all))));
  };
  for_each_broadcast_row<3>(p, [&](int64_t first, const int64_t* off, int64_t len) {
    const uint8_t* cr = cb + off[0];
    const Bits* ar = ab + off[1];
    const Bits* br = bb + off[2];
    Bits* yr = yb + first;
    if (sc == 1 && sa == 1 && sb == 1) {
      for (int64_t i = 0; i < len; ++i) yr[i] = pick(cr[i], ar[i], br[i]);
    } else if (sc == 1 && sa == 1 && sb == 0) {
      const U bv = br[0];
      for (int64_t i = 0; i < len; ++i) yr[i] = pick(cr[i], ar[i], bv);
    } else if (sc == 1 && sa == 0 && sb == 1) {
      const U av = ar[0];
      for (int64_t i = 0; i < len; ++i) yr[i] = pick(cr[i], av, br[i]);
    } else {
      for (int64_t i = 0; i < len; ++i) yr[i] = pick(cr[i * sc], ar[i * sa], br[i * sb]);
    }
  });
}

}  // namespace ampc::kernels::cpu
