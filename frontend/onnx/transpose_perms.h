// torch 1.13 exports `x.movedim(src, -1)` (and other moves to a negative position) as a
// Transpose whose perm holds the negative position as it was given (perm 0,1,-1,2), which
// ONNX does not define (perm entries are axes in [0, rank)); shape inference then gives up
// and the graph loses its types from there on. The meaning is unambiguous (perm has one
// entry per axis, so -1 is the last axis, as PyTorch means it): each negative entry gets the
// rank added before shape inference. An entry out of [-rank, rank) is left for the verifier
// to refuse by name.
#pragma once

#include <onnx/onnx_pb.h>

namespace ampc::onnx_io {

// Returns the number of Transpose nodes whose perm was rewritten (subgraphs included).
int normalize_transpose_perms(onnx::GraphProto& graph);

}  // namespace ampc::onnx_io
