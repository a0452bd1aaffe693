// The time loop of one direction of an ONNX LSTM, GRU or RNN, unrolled into primitive ops
// (used by recurrent_lowering.cc): the input projection of every time step as one MatMul,
// then per step the recurrent MatMul, the gates and the state update, as the ONNX spec
// writes the equations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes::recurrent {

enum class CellKind { kLSTM, kGRU, kRNN };

// One activation function of the spec's list, with its alpha/beta (default or given).
struct Activation {
  std::string name;  // as the spec spells it: Sigmoid, Tanh, Relu, LeakyRelu, ...
  float alpha = 0;
  float beta = 0;
};

struct LayerSpec {
  CellKind cell = CellKind::kLSTM;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 1;
  DType dtype = DType::kFloat32;
  std::optional<float> clip;
  bool input_forget = false;
  bool linear_before_reset = false;
  // f, g, h (LSTM), f, g (GRU), f (RNN) of each direction, direction after direction.
  std::vector<Activation> activations;
  bool cast_projections = false;  // RecurrentLoweringOptions::cast_projections

  int64_t gates() const { return cell == CellKind::kLSTM ? 4 : cell == CellKind::kGRU ? 3 : 1; }
};

// One direction's operands, already sliced out of the node's inputs; null when absent.
struct DirectionInputs {
  ir::Value* x = nullptr;        // [seq, batch, input], time-major
  ir::Value* w = nullptr;        // [gates*hidden, input]
  ir::Value* r = nullptr;        // [gates*hidden, hidden]
  ir::Value* wb = nullptr;       // [gates*hidden]
  ir::Value* rb = nullptr;       // [gates*hidden]
  ir::Value* p = nullptr;        // [3*hidden] (LSTM peepholes i, o, f)
  ir::Value* h0 = nullptr;       // [batch, hidden]
  ir::Value* c0 = nullptr;       // [batch, hidden]
  ir::Value* lengths = nullptr;  // [batch] int64 (sequence_lens)
  bool reverse = false;
  size_t first_activation = 0;  // index into LayerSpec::activations
};

struct DirectionOutputs {
  std::vector<ir::Value*> y;  // [batch, hidden] per time step, in time order
  ir::Value* h = nullptr;     // last hidden state [batch, hidden]
  ir::Value* c = nullptr;     // last cell state (LSTM)
};

DirectionOutputs unroll_direction(autodiff::GradBuilder& b, const LayerSpec& spec,
                                  const DirectionInputs& in);

// `x` through a spec activation, in primitive ops (HardSigmoid as Clip, Softsign with the
// absolute value as Where, ...). Throws for a name the spec does not list.
ir::Value* apply_activation(autodiff::GradBuilder& b, const Activation& a, ir::Value* x);

// The spec's default alpha/beta for an activation name, and whether it reads them; false
// when the name is not one the spec lists. The name is normalised to the spec's spelling.
bool activation_defaults(std::string& name, bool& uses_alpha, bool& uses_beta, float& alpha,
                         float& beta);

}  // namespace ampc::passes::recurrent
