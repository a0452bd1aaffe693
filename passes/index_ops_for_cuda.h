// GatherElements (torch.gather), ScatterElements (scatter, scatter_add), GatherND (advanced
// indexing, x[i, j]), OneHot, Trilu (tril, triu), Tile (repeat) and EyeLike (in torch's
// export of .diagonal()) as ops the CUDA backend
// runs, for CUDA plans: the element-wise indexing ops become a Gather or a ScatterND on the
// data flattened, at flat offsets computed from the indices (the index times the data's stride
// along the axis, plus each element's own coordinate times the stride on the other axes: int64
// Mul and Add with short broadcast constants); GatherND a Gather of rows at the row each index
// tuple names. An index the op would refuse is sent past the end of the flattened data, which
// the Gather or ScatterND refuses in turn, never to another element. OneHot becomes an Equal
// with the positions along its axis and a Where; Trilu with a constant diagonal a Where with
// a constant mask, EyeLike a Where of 1 and 0 with one; Tile with constant repeats an Expand
// between two Reshapes. Pure data movement, so the results are the CPU ops' bit for bit (ScatterND
// adds repeated indices in the same order as ScatterElements, accumulating 16-bit data in fp32 as
// it does). Nodes whose shapes are not static, or a Trilu or Tile whose k or repeats are computed,
// are left as they are (the CUDA backend then names them when it refuses the plan).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of nodes rewritten.
int index_ops_for_cuda(ir::Model& model);

}  // namespace ampc::passes
