// Finds the padding rows torch.onnx.export (torch 1.13) drops. PyTorch never gives row p of
// `nn.Embedding(padding_idx=p)` a gradient, but its exporter writes the lookup as a plain
// Gather (it only warns, at export), so a plain export's file trains row p like any other and
// the model drifts from PyTorch's, silently. The file keeps one trace: nn.Embedding starts row
// p at zeros, so a trained table whose Gather looks up run-time indices and that has exactly
// one all-zero row is almost surely such a table, unless the model masks the lookups itself
// (a Mul or Where of each with an operand computed from its indices: emb(t) * (t != p)...,
// which gives row p no gradient). That is a warning, not a refusal: a table loaded with a zero
// row that is meant to train (a pretrained one without padding_idx) is the file's model as
// written. ampc's exporter (ampc.export, ampc.compile of a module) keeps
// padding_idx (python/ampc/_embedding.py) and marks its files with kStopGradientKey, which
// this check leaves alone; so it does a model in ONNX's training format and one another
// producer wrote.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/autodiff.h"

namespace ampc::passes {

// One line per trained table (of trainable_parameters(model, options)) with such a row,
// naming its first Gather, the table and the row, and the two ways to keep the row untrained.
std::vector<std::string> lost_padding_row_warnings(const ir::Model& model,
                                                   const AutodiffOptions& options);

}  // namespace ampc::passes
