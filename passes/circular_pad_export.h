// Refuses the circular padding torch.onnx.export (torch 1.13) writes wrongly. torch exports
// `nn.Conv*d(padding_mode="circular")` and `F.pad(mode="circular")` as a Concat, along each
// padded axis, of a Slice of the input, the input, and another Slice; for the pad before the
// input it slices x[-(p + 1):-1] where PyTorch wraps x[-p:], so the file computes another
// function than the module (and trains it to another optimum), silently. ampc's exporter
// writes it right (python/ampc/_circular_pad.py). Here, in a file torch produced, a Concat
// whose first input is such a Slice of another of its inputs is refused by name, pointing at
// ampc.export. Nobody writes that slice on purpose: it repeats the element before the last.
//
// Only that pad shows: the same exporter also swaps an axis's two pads, which an asymmetric
// F.pad without a pad before the input leaves invisible (docs/training.md).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Throws naming the first such Concat of a model whose producer is "pytorch".
void refuse_misexported_circular_pad(const ir::Model& model);

}  // namespace ampc::passes
