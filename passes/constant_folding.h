// Folds what the exporters leave around shapes (PyTorch writes Constant -> Unsqueeze ->
// Concat -> Reshape chains, and Shape -> Gather of static shapes) into initializers, so later
// passes see static shape inputs. Constant nodes become initializers; Shape and Size fold
// from static types; any other node folds when all its inputs are constant initializers that
// do not change (no training state, no graph input) and are not a model's float initializer
// (a parameter). Nodes are evaluated by the CPU backend's operator (cpu_evaluation.h), the
// one definition of each op's semantics; a node it rejects stays, for the backend to report
// when it runs. Integer data folds; float math is left to the backends, so it rounds as they
// do, except on tiny tensors through ops that every backend computes bit for bit (data
// movement, comparisons, correctly rounded +, -, *, /, sqrt).
#pragma once

#include <cstdint>
#include <set>

#include "ir/graph.h"

namespace ampc::passes {

struct ConstantFoldingOptions {
  // Results with more elements stay computed at run time (no plan bloat).
  int64_t max_elements = 4096;
};

// Returns the number of nodes folded.
int fold_constants(ir::Model& model, const ConstantFoldingOptions& options = {});

// The main graph's values whose data may change, which nothing folds: training state (a step
// counter read by `counter + 1`), the buffers a forward writes, which become state in training
// (buffer_updates.h), and graph inputs (an initializer that is also one: the caller may feed
// another value).
std::set<const ir::Value*> variable_values(const ir::Model& model);

// The data of `v` when it is an initializer outside `variable` (variable_values): a constant
// whose data does not change; null otherwise (also for a null `v`).
const ir::Tensor* fixed_data(const ir::Value* v, const std::set<const ir::Value*>& variable);

}  // namespace ampc::passes
