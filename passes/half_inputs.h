// `--half-inputs` (docs/amp-diagnostics.md): the float32 data inputs of the graph become
// inputs of the low dtype (fp16 or bf16), so a step reads half the input bytes; the batcher
// rounds the data when it prepares batches (runtime/data/batcher.h). Inside the graph one
// Cast back to fp32 feeds the readers, so the model computes what it did on rounded data;
// autocast's Cast down of an ALLOW reader then folds away (cast_cleanup.h), so a MatMul reads
// the input as it arrives. Run before autocast.
#pragma once

#include "base/dtype.h"
#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of inputs converted. `low` must be fp16 or bf16.
int halve_float_inputs(ir::Model& model, DType low);

}  // namespace ampc::passes
