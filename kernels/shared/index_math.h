// Index arithmetic of the data-movement kernels (kernels/cuda/{copy,pad,gather_scatter,
// elementwise}.cu) and their CPU twins (kernels/twin): N-d layouts whose strides travel to the
// kernel by value, the offsets of a linear index, Pad's source index, and Gather / ScatterND
// index fixing. The host-side helpers (building layouts) are plain inline functions; the
// per-element ones are AMPC_HD so that nvcc and g++ compile the same code.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/shared/hd.h"

#include <string>
#include <vector>

#include "base/error.h"

namespace ampc::kernels::shared::dm {

constexpr int kMaxDims = 8;

// A loop nest of up to kMaxDims dimensions (row-major, the last fastest) that K tensors walk
// with their own strides (in elements; negative and 0 allowed). Passed to kernels by value.
template <int K>
struct Layout {
  int32_t rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[K][kMaxDims] = {};
  int64_t numel = 1;
};

// offset[k] = sum_d index_d(i) * stride[k][d] for the linear index i (row-major over shape).
// I is the index type: uint32_t when numel fits (a cheaper division), else int64_t.
template <int K, typename I>
AMPC_HD void layout_offsets(const Layout<K>& l, I i, int64_t (&offset)[K]) {
  if (l.rank == 1) {  // the common merged case: no division
    for (int k = 0; k < K; ++k) offset[k] = static_cast<int64_t>(i) * l.stride[k][0];
    return;
  }
  for (int k = 0; k < K; ++k) offset[k] = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const I n = static_cast<I>(l.shape[d]);
    const I q = i / n;
    const int64_t r = static_cast<int64_t>(i - q * n);
    i = q;
    for (int k = 0; k < K; ++k) offset[k] += r * l.stride[k][d];
  }
}

// Position along an axis of size dim of Pad's output coordinate o with `before` elements of
// padding (negative: cropped): the source coordinate, or -1 for the constant
// (runtime/cpu/ops/tensor_layout.cc's pad_source). mode: 0 constant, 1 edge, 2 reflect.
AMPC_HD int64_t pad_source(int64_t o, int64_t before, int64_t dim, int32_t mode) {
  int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == 0) return -1;
  if (mode == 1) return i < 0 ? 0 : dim - 1;
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);
  i %= period;
  if (i < 0) i += period;
  return i < dim ? i : period - i;
}

// An index into an axis of size dim as the CPU ops read it (negative counts from the end).
// Out of [-dim, dim), which the CPU op rejects, it is clamped into [0, dim) and *bad set.
AMPC_HD int64_t fix_index(int64_t i, int64_t dim, bool* bad) {
  if (i < -dim || i >= dim) {
    *bad = true;
    return i < 0 ? 0 : dim - 1;
  }
  return i < 0 ? i + dim : i;
}

// Pad's addressing: output shape, input shape and strides, padding before each dimension and
// the mode, passed to kernels by value.
struct PadLayout {
  int32_t rank = 0;
  int32_t mode = 0;
  int64_t out_shape[kMaxDims] = {};
  int64_t in_shape[kMaxDims] = {};
  int64_t in_stride[kMaxDims] = {};
  int64_t before[kMaxDims] = {};
};

// The input offset of Pad's output element i (row-major), or -1 for the constant.
AMPC_HD int64_t pad_offset(const PadLayout& l, int64_t i) {
  int64_t off = 0;
  bool constant = false;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t o = i % l.out_shape[d];
    i /= l.out_shape[d];
    const int64_t s = pad_source(o, l.before[d], l.in_shape[d], l.mode);
    constant = constant || s < 0;
    off += s * l.in_stride[d];
  }
  return constant ? -1 : off;
}

// Gather's source offset of output element k: out [outer, num_indices, inner] from data
// [outer, axis_dim, inner]. K: the index type of the divisions (uint32_t when the output has
// fewer than 2^31 elements: a cheaper division on the device).
template <typename K, typename Index>
AMPC_HD int64_t gather_source(K k, int64_t axis_dim, int64_t inner, int64_t num_indices,
                              const Index* indices, bool* bad) {
  const K r = k / static_cast<K>(inner);
  const K o = r / static_cast<K>(num_indices);
  const int64_t i = static_cast<int64_t>(k - r * static_cast<K>(inner));
  const int64_t j = static_cast<int64_t>(r - o * static_cast<K>(num_indices));
  const int64_t a = fix_index(static_cast<int64_t>(indices[j]), axis_dim, bad);
  return (static_cast<int64_t>(o) * axis_dim + a) * inner + i;
}

// Bit-moving storage type of an element size (1, 2, 4, 8 bytes).
template <int Bytes>
struct Bits {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8);
  using type = std::conditional_t<
      Bytes == 1, uint8_t,
      std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;
};

// ---- Host side: building the layouts (plain inline functions) ----

using Dims = std::vector<int64_t>;

inline int64_t numel_of(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline Dims contiguous_strides(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Strides that read a tensor of in_shape broadcast (numpy rules, aligned to the right) to
// out_shape: 0 along broadcast dimensions. Throws when the shapes do not broadcast that way.
inline Dims broadcast_strides(const Dims& in_shape, const Dims& out_shape) {
  if (in_shape.size() > out_shape.size())
    throw Error("cannot broadcast a rank-" + std::to_string(in_shape.size()) + " tensor to rank " +
                std::to_string(out_shape.size()));
  const Dims cs = contiguous_strides(in_shape);
  Dims st(out_shape.size(), 0);
  const size_t off = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) {
    if (in_shape[i] != 1 && in_shape[i] != out_shape[off + i])
      throw Error("cannot broadcast dimension " + std::to_string(in_shape[i]) + " to " +
                  std::to_string(out_shape[off + i]));
    st[off + i] = in_shape[i] == 1 ? 0 : cs[i];
  }
  return st;
}

// The layout of `shape` walked with strides[k]: size-1 dimensions dropped, and a dimension
// merged into the next when every tensor steps over it as over one longer dimension. Throws
// when more than kMaxDims dimensions remain, or when the ranks disagree.
template <int K>
Layout<K> make_layout(const Dims& shape, const Dims (&strides)[K], const char* what) {
  for (int k = 0; k < K; ++k) {
    if (strides[k].size() != shape.size())
      throw Error(std::string(what) + ": strides and shape have different ranks");
  }
  Dims out_shape;
  std::vector<Dims> out_strides(K);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) throw Error(std::string(what) + ": negative dimension");
    if (shape[d] == 1) continue;
    bool merge = !out_shape.empty();
    for (int k = 0; k < K && merge; ++k) merge = out_strides[k].back() == strides[k][d] * shape[d];
    if (merge) {
      out_shape.back() *= shape[d];
      for (int k = 0; k < K; ++k) out_strides[k].back() = strides[k][d];
    } else {
      out_shape.push_back(shape[d]);
      for (int k = 0; k < K; ++k) out_strides[k].push_back(strides[k][d]);
    }
  }
  if (out_shape.size() > static_cast<size_t>(kMaxDims))
    throw Error(std::string(what) + ": " + std::to_string(out_shape.size()) +
                " dimensions after merging; at most " + std::to_string(kMaxDims) +
                " are supported");
  Layout<K> l;
  l.rank = static_cast<int32_t>(out_shape.size());
  l.numel = numel_of(shape);
  for (size_t d = 0; d < out_shape.size(); ++d) {
    l.shape[d] = out_shape[d];
    for (int k = 0; k < K; ++k) l.stride[k][d] = out_strides[k][d];
  }
  return l;
}

// Pad's layout for an input of in_shape padded by pads_begin / pads_end (negative: cropped).
inline PadLayout make_pad_layout(const Dims& in_shape, const Dims& pads_begin, const Dims& pads_end,
                                 int32_t mode) {
  if (pads_begin.size() != in_shape.size() || pads_end.size() != in_shape.size())
    throw Error("pad: pads do not have one entry per dimension");
  if (in_shape.size() > static_cast<size_t>(kMaxDims))
    throw Error("pad: " + std::to_string(in_shape.size()) + " dimensions; at most " +
                std::to_string(kMaxDims) + " are supported");
  if (mode < 0 || mode > 2) throw Error("pad: unknown mode " + std::to_string(mode));
  PadLayout l;
  l.rank = static_cast<int32_t>(in_shape.size());
  l.mode = mode;
  const Dims strides = contiguous_strides(in_shape);
  for (size_t d = 0; d < in_shape.size(); ++d) {
    l.in_shape[d] = in_shape[d];
    l.in_stride[d] = strides[d];
    l.before[d] = pads_begin[d];
    l.out_shape[d] = in_shape[d] + pads_begin[d] + pads_end[d];
    if (l.out_shape[d] < 0)
      throw Error("pad: pads remove more than the whole axis " + std::to_string(d));
    if (mode != 0 && in_shape[d] == 0 && l.out_shape[d] > 0)
      throw Error("pad: cannot edge- or reflect-pad an empty axis");
  }
  return l;
}

// Concat and Split as one [outer, row] strided copy per part: part k's row is
// axis_sizes[k] * inner elements, at `offset` elements into the joined rows of `joined` elements
// ([outer, total * inner]). copy(k, row, offset, joined) for every part in order. parts (the
// number of inputs or outputs, what `noun` names) must be axis_sizes.size().
template <typename Copy>
void for_each_joined_part(const char* what, const char* noun, size_t parts, const Dims& axis_sizes,
                          int64_t inner, Copy&& copy) {
  if (parts != axis_sizes.size())
    throw Error(std::string(what) + ": " + std::to_string(parts) + " " + noun + " but " +
                std::to_string(axis_sizes.size()) + " axis sizes");
  int64_t total = 0;
  for (int64_t a : axis_sizes) total += a;
  int64_t offset = 0;
  for (size_t k = 0; k < parts; ++k) {
    copy(k, axis_sizes[k] * inner, offset * inner, total * inner);
    offset += axis_sizes[k];
  }
}

// Bytes of a fixed-width element type the data-movement kernels move; throws otherwise.
inline int element_bytes(size_t size, const char* what) {
  if (size != 1 && size != 2 && size != 4 && size != 8)
    throw Error(std::string(what) + ": element type of " + std::to_string(size) +
                " bytes is not supported (1, 2, 4 or 8)");
  return static_cast<int>(size);
}

}  // namespace ampc::kernels::shared::dm
