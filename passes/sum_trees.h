// Trees of Adds: a sum of many terms as autodiff writes it (each contribution added to the
// running gradient, two operands at a time), for passes that rewrite a whole sum at once
// (summed_matmuls.h, summed_pads.h).
#pragma once

#include <functional>
#include <set>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

// An Add of two operands of its output's static type (no broadcast).
bool is_plain_sum(const ir::Node* n);

// Which Adds belong to a pass's trees (is_plain_sum and the pass's own conditions).
using SumTest = std::function<bool(const ir::Node*)>;

// Whether `n` is a tree's root: a sum whose output is not itself a term of a larger sum.
// `kept`: values read after the step (dead_code_elimination.h's kept_values).
bool is_sum_root(const ir::Node* n, const SumTest& is_sum, const std::set<const ir::Value*>& kept);

// The terms of the tree under `root` (the operands that are not sums of the tree), in operand
// order; empty when a value of the tree, term or partial sum, is read elsewhere too or kept.
std::vector<ir::Value*> sum_terms(ir::Node* root, const SumTest& is_sum,
                                  const std::set<const ir::Value*>& kept);

}  // namespace ampc::passes
