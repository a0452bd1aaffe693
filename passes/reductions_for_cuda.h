// ArgMax and ArgMin (torch.argmax), TopK (torch.topk), ReduceLogSumExp (torch.logsumexp),
// CumSum (torch.cumsum) and integer reductions as ops the CUDA backend runs, for CUDA plans:
// - ArgMax / ArgMin: the extreme along the axis (ReduceMax / ReduceMin), the positions that
//   hold it (Equal, or IsNaN: a NaN is the maximum and the minimum, as in PyTorch), and the
//   first (or with select_last_index the last) of them as the ReduceMin (ReduceMax) of a Where
//   between the positions and a filler. Positions are float32, exact up to 2^24; longer axes
//   are left as they are. The same indices as the CPU op, bit for bit.
// - TopK (sorted, a constant k up to 32: a mixture of experts' top-2 routing, top-k pooling):
//   k rounds of the same choice among the positions not yet taken (for the smallest, the
//   least number, NaNs last), each value read back from its position. Ties by lower index and
//   NaN the largest, as the CPU op orders them; the same values and indices, bit for bit.
//   Integer TopK (int32, int64: torch.sort of lengths in pack_padded_sequence, argsort of
//   tokens), and float TopK with a larger k (torch.sort of a whole axis), by ranks: each
//   element's rank counted over all pairs along the axis (Greater or Less, Equal and the pairs'
//   positions for ties), slot r taking the element of rank r; the CPU op's order, bit for bit,
//   for up to 2^24 comparisons (elements times the axis's length).
// - ReduceLogSumExp: m + log(sum(exp(x - m))) with m the maximum, as the CPU op computes it, and
//   m itself where m is infinite or NaN; 16-bit data in fp32, rounded once. Sums in another
//   order than the CPU op, so equal within rounding.
// - CumSum: a scan in log2(n) steps, each adding to the running sums a copy shifted along the
//   axis (a Slice and a Pad with zeros), exclusive as one more shift, reverse as shifts the
//   other way. Integers exactly; floats within rounding (another order of additions), 16-bit
//   data in fp32 rounded once, as the CPU op accumulates.
// - Integer ReduceSum, ReduceMax and ReduceMin (int32, int64: attention_mask.sum(-1)): each
//   reduced axis halved step by step (the first half combined with the second), exact.
// ArgMax / ArgMin / ReduceLogSumExp of other types than f32, f16 and bf16 (the types of the CUDA
// backend's reductions), TopK of other types than those and int32 / int64, unsorted with k above
// one or with a k computed at run time, and axes computed at run time, are left as they are (the
// CUDA backend then names them when it refuses the plan).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Returns the number of nodes rewritten.
int reductions_for_cuda(ir::Model& model);

}  // namespace ampc::passes
