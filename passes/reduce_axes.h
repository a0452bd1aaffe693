// The axes a Reduce node (ReduceSum, ReduceMean, ReduceMax, ...) reduces, read the way its
// opset writes them: an `axes` attribute, or a constant second input (ReduceSum from opset 13,
// the others from 18).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

// The reduced axes of `n`, whose input has rank `rank`, normalized (0 <= axis < rank), sorted
// and unique; every axis when none are given. Nothing when they are computed at run time, or
// when no axes mean no reduction (noop_with_empty_axes).
std::optional<std::vector<int64_t>> reduce_axes(const ir::Node& n, size_t rank);

}  // namespace ampc::passes
