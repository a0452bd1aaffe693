// ONNX LSTM, GRU and RNN nodes lowered into primitive per-time-step ops (MatMul for the
// input and recurrent projections, Sigmoid/Tanh/Mul/Add/... for the gates, Split, Slice,
// Concat, Reshape, Transpose), for a static sequence length. Autodiff, autocast, fusion and
// both backends then handle recurrent layers with no kernel of their own; inference runs
// through the same lowering. Supported: every direction, layout 0 and 1, initial states,
// biases, peepholes, sequence_lens (steps past a sequence's length keep the state and write
// zeros to Y), clip, input_forget, GRU's linear_before_reset, and every activation the ONNX
// spec lists. Refused with one line naming the node: a sequence length or batch that is
// not static, models below opset 13.
#pragma once

#include "ir/graph.h"

namespace ampc::passes {

struct RecurrentLoweringOptions {
  // Mixed precision: each projection's MatMul result gets an explicit Cast back to the
  // layer's float type, so autocast runs the MatMuls in fp16/bf16 (ALLOW) while the gate
  // math reads fp32 (explicit Casts are KEEP) - docs/mixed-precision.md.
  bool cast_projections = false;
};

// Returns the number of recurrent nodes lowered.
int lower_recurrent_layers(ir::Model& model, const RecurrentLoweringOptions& options = {});

}  // namespace ampc::passes
