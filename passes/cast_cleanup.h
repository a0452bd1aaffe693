// Cast cleanup: Casts to the dtype a value already has are removed, and Cast chains are
// folded where the intermediate dtype holds every value of the source exactly:
// a->b->a becomes nothing and a->b->c becomes a->c. A chain through a narrower dtype
// (fp32->fp16->fp32) is a deliberate rounding and stays.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct CastCleanupOptions {};

// Whether every value of dtype `narrow` is exactly representable in `wide`.
bool dtype_holds(DType wide, DType narrow);

// Graph outputs and state-update sources/targets: values a pass may not rename away.
bool is_pinned_value(const ir::Model& model, const ir::Value* v);

// Returns the number of Casts removed or shortened. Casts left without readers are
// removed too; graph outputs and state-update values are never renamed.
int cleanup_casts(ir::Model& model, const CastCleanupOptions& options = {});

}  // namespace ampc::passes
