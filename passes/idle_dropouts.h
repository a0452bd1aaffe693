// Dropouts that drop nothing, removed before anything reads them: their readers read the
// Dropout's input. ONNX's Dropout is the identity (its mask all true) when training_mode is
// omitted or false, when the ratio is 0 (PyTorch's nn.Dropout(0.0) in a model exported in
// training mode: a common setting for pre-training, the default of nanoGPT-style configs),
// and always before opset 12, where it has no training mode. PyTorch computes such a dropout
// as the identity too. Left as a Dropout, the step copied its input, filled a mask and, in
// training, the gradient was multiplied by that mask and by 1 / (1 - 0).
//
// A Dropout is removed only where its mode and ratio are constants whose data does not change
// (initializers outside passes/constant_folding.h's variable_values) and nothing reads its
// mask or keeps its outputs after the step (graph outputs, state updates).
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

// Removes such Dropouts of the main graph; returns how many.
int remove_idle_dropouts(ir::Model& model);

}  // namespace ampc::passes
