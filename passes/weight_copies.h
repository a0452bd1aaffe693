// Keeps each trained parameter's 16-bit copy as state, written by the optimizer's update.
//
// Autocast casts an fp32 master weight to fp16 or bf16 once per step (one Cast per parameter
// and dtype, the graph form of PyTorch's weight-cast cache), so every step reads the whole fp32
// parameter a second time and writes its copy. The optimizer has just read and written that
// parameter: the copy of the new value costs it only the store. Here the forward Cast of a
// parameter becomes a read of a state initializer (the copy, initially the cast of the initial
// value), and the copy's state update is Cast(the parameter's new value), placed with the
// optimizer so that fusion computes it in the same kernel:
//
//   before   forward: w16 = Cast(w)                optimizer: w <- w_new
//   after    forward: reads w.bf16 (state)          optimizer: w <- w_new, w.bf16 <- Cast(w_new)
//
// The bits are those of casting in every step: the copy is the cast of the value the forward
// would cast. A skip-step keeps the copy as it keeps the master: Where(skip, w, x) becomes
// Where(skip, w.bf16, Cast(x)). Each copy is recorded in Model::rounded_copies, so that backends
// recompute it when the master is set from outside (resume, Python) and leave it out of the
// state they report (it is derived; checkpoints keep the masters only).
//
// Runs after the training step is exported (the embedded step keeps autocast's Casts: the
// evaluation and checkpoint formats stay those of any other plan) and before lowering.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace ampc::passes {

// The suffix of a copy's name after its master's, before the dtype: "fc.weight.copy_bf16".
inline constexpr std::string_view kCopySuffix = ".copy_";
// The suffix of the skip-step's Where that keeps a copy (after its Cast's name).
inline constexpr std::string_view kCopyGuardSuffix = "_kept";

// Returns the number of copies kept: one per Cast that reads a state-updated fp32 parameter
// and narrows it to fp16 or bf16.
int keep_weight_copies(ir::Model& model);

}  // namespace ampc::passes
