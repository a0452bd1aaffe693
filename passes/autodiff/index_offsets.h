// Flat offsets of elements named by index tensors, built as graph ops: what the gradients of
// the indexing ops (rules_index.cc) and the CUDA forms of GatherElements / ScatterElements
// (passes/index_ops_for_cuda.h) address data through, a Gather or ScatterND on it flattened.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/autodiff/grad_builder.h"

namespace ampc::passes::autodiff {

// Indices along an axis of size `size` as int64 in [0, size): negative ones counted from
// the end (a Cast first when they are int32).
ir::Value* wrapped_indices(GradBuilder& b, ir::Value* idx, int64_t size);

// The flat offset in data of shape `d` of each element `idx` names along `axis`, as
// GatherElements and ScatterElements read it: the index times data's stride along the axis
// plus, for every other axis, the element's own coordinate times data's stride there (a
// short constant per axis, broadcast). int64, of idx's shape.
ir::Value* element_offsets(GradBuilder& b, const std::vector<int64_t>& d, int64_t axis,
                           ir::Value* idx);

}  // namespace ampc::passes::autodiff
