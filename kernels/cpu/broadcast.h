// Multidirectional (numpy) broadcasting: the common shape of several operands and an
// iteration plan over it that reads each operand through strides (0 on broadcast dimensions).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ampc::kernels::cpu {

using Shape = std::vector<int64_t>;

// The numpy broadcast of `shapes`; nullopt when two dimensions are incompatible.
std::optional<Shape> broadcast_shapes(const std::vector<Shape>& shapes);

// Row-major element strides of a contiguous tensor of `shape`.
Shape contiguous_strides(const Shape& shape);

// How to walk an output of some shape while reading operands broadcast to it. Dimensions are
// collapsed where every operand allows, so `shape` is as short as possible (at least rank 1).
// Element (i0, ..., in) of the output reads operand k at sum_j i_j * strides[k][j].
struct BroadcastPlan {
  Shape shape;
  std::vector<Shape> strides;
  int64_t numel = 0;
  int64_t inner() const { return shape.back(); }
  int64_t rows() const { return shape.back() ? numel / shape.back() : 0; }
  // Offsets of row `row` (the flat index over all but the last dimension) into each operand.
  void row_offsets(int64_t row, int64_t* offsets) const;
};

// Each input shape must broadcast to out_shape (not checked here).
BroadcastPlan make_broadcast_plan(const Shape& out_shape, const std::vector<Shape>& in_shapes);

// Collapses adjacent dimensions of a strided walk where all stride sets stay linear, and drops
// size-1 dimensions. Used by broadcasting and by strided copies. Leaves at least one dimension.
void collapse_dims(Shape& shape, std::vector<Shape*> strides);

// Work below this many elements stays on one thread: the OpenMP threads wait passively, and
// waking them costs more than a second thread saves on a memory-bound map of fewer elements
// (measured on the bundled gpt's 32K-element kernels: 2 threads took 3x as long as 1).
constexpr int64_t kParallelThreshold = 131072;

}  // namespace ampc::kernels::cpu
