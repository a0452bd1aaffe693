#include "kernels/cpu/broadcast.h"

#include <algorithm>

namespace ampc::kernels::cpu {

std::optional<Shape> broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    const size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) return std::nullopt;
      o = s[i];
    }
  }
  return out;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

void collapse_dims(Shape& shape, std::vector<Shape*> strides) {
  Shape new_shape;
  std::vector<Shape> new_strides(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !new_shape.empty();
    for (size_t k = 0; k < strides.size() && merge; ++k) {
      merge = new_strides[k].back() == (*strides[k])[d] * shape[d];
    }
    if (merge) {
      new_shape.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) new_strides[k].back() = (*strides[k])[d];
    } else {
      new_shape.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) new_strides[k].push_back((*strides[k])[d]);
    }
  }
  if (new_shape.empty()) {
    // All dimensions are 1 (a scalar) or some dimension is 0.
    const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
    new_shape.push_back(empty ? 0 : 1);
    for (auto& s : new_strides) s.push_back(0);
  }
  shape = std::move(new_shape);
  for (size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(new_strides[k]);
}

BroadcastPlan make_broadcast_plan(const Shape& out_shape, const std::vector<Shape>& in_shapes) {
  BroadcastPlan p;
  p.shape = out_shape;
  p.numel = 1;
  for (int64_t d : out_shape) p.numel *= d;
  const size_t rank = out_shape.size();
  for (const auto& s : in_shapes) {
    Shape st(rank, 0);
    const Shape cs = contiguous_strides(s);
    const size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) st[off + i] = s[i] == 1 ? 0 : cs[i];
    p.strides.push_back(std::move(st));
  }
  std::vector<Shape*> ptrs;
  for (auto& s : p.strides) ptrs.push_back(&s);
  collapse_dims(p.shape, ptrs);
  return p;
}

void BroadcastPlan::row_offsets(int64_t row, int64_t* offsets) const {
  for (size_t k = 0; k < strides.size(); ++k) offsets[k] = 0;
  for (size_t d = shape.size() - 1; d-- > 0;) {
    const int64_t i = row % shape[d];
    row /= shape[d];
    for (size_t k = 0; k < strides.size(); ++k) offsets[k] += i * strides[k][d];
  }
}

}  // namespace ampc::kernels::cpu
