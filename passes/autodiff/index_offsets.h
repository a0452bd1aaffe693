// Flat offsets of elements named by index tensors, built as graph ops: what the gradients of
// the indexing ops (rules_index.cc) and the CUDA forms of GatherElements / ScatterElements
// (passes/index_ops_for_cuda.h) address data through, a Gather or ScatterND on it flattened.
#pragma once

#include <optional>

#include <cstdint>
#include <vector>

#include "passes/autodiff/grad_builder.h"

namespace ampc::passes::autodiff {

// Indices along an axis of size `size` as int64 in [0, size): negative ones counted from
// the end (a Cast first when they are int32).
ir::Value* wrapped_indices(GradBuilder& b, ir::Value* idx, int64_t size);

// Whether each index lies outside [-size, size), the range the indexing ops accept (bool, of
// idx's shape).
ir::Value* out_of_range(GradBuilder& b, ir::Value* idx, int64_t size);

// `offsets` where `bad` is false and `past_end` where it is true: an index the op would refuse
// then addresses past the end of the flattened data, which the Gather or ScatterND that reads
// the offsets refuses in turn (the CUDA kernels raise their out-of-range flag), instead of
// another, valid element.
ir::Value* past_end_where(GradBuilder& b, ir::Value* bad, ir::Value* offsets, int64_t past_end);

// The flat offset in data of shape `d` of each element `idx` names along `axis`, as
// GatherElements and ScatterElements read it: the index times data's stride along the axis
// plus, for every other axis, the element's own coordinate times data's stride there (a
// short constant per axis, broadcast). int64, of idx's shape.
ir::Value* element_offsets(GradBuilder& b, const std::vector<int64_t>& d, int64_t axis,
                           ir::Value* idx);

// GatherND's addressing with index tuples of length q and batch_dims bd: data of shape `d`
// viewed as [rows, slice] (rows the product of its first bd + q dimensions), and the row each
// tuple names (its coordinates, negative ones counted from the end, times the row strides,
// plus the batch coordinates' share), past the end where a coordinate is out of range.
struct NdRows {
  ir::Value* rows = nullptr;  // int64, the index tuples' shape (idx's without its last axis)
  int64_t count = 0;          // rows of the view
  int64_t slice = 0;          // elements per row
};
// Nothing for tuples of length 0 or longer than data's rank allows.
std::optional<NdRows> nd_rows(GradBuilder& b, const std::vector<int64_t>& d, ir::Value* idx,
                              size_t bd);

}  // namespace ampc::passes::autodiff
