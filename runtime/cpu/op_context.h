// What a CPU operator implementation sees of its step: inputs, attributes, and a way to
// allocate its outputs once it has computed their shapes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/plan/plan.pb.h"
#include "runtime/tensor.h"

namespace ampc::rt::cpu {

class OpContext {
 public:
  OpContext(const plan::Step& step, std::vector<const Tensor*> inputs, std::vector<Tensor*> outputs)
      : step_(step), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

  const plan::Step& step() const { return step_; }
  const std::string& op() const { return step_.op(); }
  int64_t opset() const { return step_.opset_version(); }

  // Inputs: `input(i)` is null when omitted or beyond the list; `in(i)` requires it.
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  const Tensor& in(int i) const;

  // Outputs: allocate with the computed type and shape, then fill. Zero-filled. Where the
  // executor has already placed the output (a view of the memory plan's arena of that type
  // and shape), that storage is used: zeroed, unless it overlaps an input, which the memory
  // plan allows only for a write in place (elementwise ops, views), whose input is kept.
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  bool has_output(int i) const { return i < num_outputs() && outputs_[i] != nullptr; }
  Tensor& output(int i, DType dtype, std::vector<int64_t> shape);
  // The placed output i when it has this type and shape and shares no byte with an input,
  // else null: an op that cannot compute in place may write it directly.
  Tensor* placed_apart(int i, DType dtype, const std::vector<int64_t>& shape) const;
  // As output(), for an op that writes every element: placed storage is not zeroed first.
  Tensor& output_for_overwrite(int i, DType dtype, std::vector<int64_t> shape);
  // Output i holding a copy of input `input` (same type and shape), for an op that then
  // changes some of its elements (Scatter*, Trilu). Never the input's own storage: a plain
  // Tensor copy of an input placed in the arena, or of a view, would share it.
  Tensor& output_copy_of_input(int i, int input);
  // Stores a finished tensor as output i (no-op when that output is omitted); into the
  // placed storage when there is one of its type and shape (nothing to copy for a view
  // already there).
  void set_output(int i, Tensor t);

  // Attributes.
  bool has_attr(const std::string& name) const { return find(name) != nullptr; }
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  int64_t attr_int(const std::string& name) const;  // required
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> fallback = {}) const;
  std::vector<std::string> attr_strings(const std::string& name) const;
  // A tensor-valued attribute as a runtime tensor; nullopt when absent.
  std::optional<Tensor> attr_tensor(const std::string& name) const;

  // Randomness: ops without a seed of their own (training-mode Dropout) draw from a stream
  // keyed by the executor's seed, the run (training step) and the step of the plan, so a
  // training run is reproducible and resumes bit-exactly (see Executor::set_random_state).
  uint64_t random_key() const { return random_key_; }
  void set_random_key(uint64_t key) { random_key_ = key; }

  // "'node' (Op)": how messages name this step.
  std::string label() const;
  // Throws ampc::Error "<label>: <what>".
  [[noreturn]] void fail(const std::string& what) const;
  // Throws the standard "type X not supported" error for input i.
  [[noreturn]] void unsupported_dtype(int input_index) const;

 private:
  const plan::Attribute* find(const std::string& name) const;
  // The attribute `name`, null when absent; a failure when it is not of `kind` (`kind_name`:
  // "an int", "a list of floats", ...).
  const plan::Attribute* find_of_kind(const std::string& name, plan::Attribute::ValueCase kind,
                                      const char* kind_name) const;
  // The placed output i when it has this type and shape, else null.
  Tensor* placed(int i, DType dtype, const std::vector<int64_t>& shape) const;
  bool overlaps_input(const Tensor& t) const;

  const plan::Step& step_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
  std::map<int, Tensor> discarded_;  // storage for outputs the plan omits
  uint64_t random_key_ = 0;
};

// Converts plan tensor data into a runtime tensor.
Tensor tensor_from_data(const plan::TensorData& data);

// Element `i` of a float tensor (f32, f64, f16 or bf16) as a double: for code that reads
// elements one at a time whatever their type (checks, small ops), not for kernels.
double float_element(const Tensor& t, int64_t i);

// The values of an int64 or int32 input (axes, shapes, pads); other types fail.
std::vector<int64_t> int_values(const OpContext& ctx, int input);
// axis in [-rank, rank) mapped to [0, rank); fails otherwise, naming the node.
int64_t normalize_axis(const OpContext& ctx, int64_t axis, int64_t rank);

}  // namespace ampc::rt::cpu
