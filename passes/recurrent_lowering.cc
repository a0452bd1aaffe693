#include "passes/recurrent_lowering.h"

#include <algorithm>

#include "base/error.h"
#include "passes/recurrent_cells.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Value;
using recurrent::Activation;
using recurrent::CellKind;
using recurrent::LayerSpec;

[[noreturn]] void refuse(const ir::Node& n, const std::string& why) {
  throw Error("node " + n.label() + ": " + why);
}

Value* input(const ir::Node& n, size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : nullptr;
}

// The activations of every direction, with their alpha/beta: the spec's defaults when the
// node has none; a list for one direction serves both.
std::vector<Activation> activations(const ir::Node& n, const LayerSpec& spec) {
  static const std::vector<std::string> defaults[] = {
      {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh"}, {"Tanh"}};
  const auto per_direction = static_cast<size_t>(spec.cell == CellKind::kLSTM  ? 3
                                                 : spec.cell == CellKind::kGRU ? 2
                                                                               : 1);
  const auto* names_attr = n.attr("activations");
  std::vector<std::string> names =
      names_attr ? names_attr->strings : defaults[static_cast<int>(spec.cell)];
  const auto dirs = static_cast<size_t>(spec.directions);
  const std::vector<float> no_values;
  const auto& alphas = n.attr("activation_alpha") ? n.attr("activation_alpha")->floats : no_values;
  const auto& betas = n.attr("activation_beta") ? n.attr("activation_beta")->floats : no_values;
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (std::string name : names) {
    Activation a;
    bool uses_alpha = false, uses_beta = false;
    if (!recurrent::activation_defaults(name, uses_alpha, uses_beta, a.alpha, a.beta))
      refuse(n, "activation '" + name + "' is not one the ONNX spec lists");
    // Given alphas and betas are consumed in order by the activations that read them.
    if (uses_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (uses_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    a.name = name;
    out.push_back(a);
  }
  if (out.size() == per_direction && dirs == 2) {
    const std::vector<Activation> first = out;
    out.insert(out.end(), first.begin(), first.end());
  }
  if (out.size() != per_direction * dirs) {
    refuse(n, "expected " + std::to_string(per_direction * dirs) + " activations, got " +
                  std::to_string(out.size()));
  }
  return out;
}

LayerSpec layer_spec(const ir::Node& n, bool cast_projections) {
  LayerSpec s;
  s.cell = n.op_type == "LSTM"  ? CellKind::kLSTM
           : n.op_type == "GRU" ? CellKind::kGRU
                                : CellKind::kRNN;
  const Value* x = input(n, 0);
  const Value* w = input(n, 1);
  if (!x || !x->type.is_static() || x->type.shape->size() != 3)
    refuse(n, "lowering needs a static sequence length and batch; X is " +
                  (x ? x->type.str() : "absent"));
  if (!w || !w->type.is_static() || w->type.shape->size() != 3)
    refuse(n, "lowering needs W of static shape [directions, gates*hidden, input]");
  if (!is_float(x->type.dtype)) refuse(n, "X must be a float tensor");
  const auto* layout = n.attr("layout");
  const bool batch_first = layout && layout->i != 0;
  const auto& xs = *x->type.shape;
  s.seq = batch_first ? xs[1] : xs[0];
  s.batch = batch_first ? xs[0] : xs[1];
  s.input = xs[2];
  s.dtype = x->type.dtype;
  s.hidden = n.attr("hidden_size") ? n.attr("hidden_size")->i : (*w->type.shape)[1] / s.gates();
  const auto* dir = n.attr("direction");
  const std::string direction = dir ? dir->s : "forward";
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    refuse(n, "direction '" + direction + "' is not forward, reverse or bidirectional");
  s.directions = direction == "bidirectional" ? 2 : 1;
  if ((*w->type.shape)[0] != s.directions || (*w->type.shape)[1] != s.gates() * s.hidden ||
      (*w->type.shape)[2] != s.input)
    refuse(n, "W is " + w->type.str() + ", which does not match X, hidden_size and direction");
  if (const auto* clip = n.attr("clip")) s.clip = clip->f;
  s.input_forget = n.attr("input_forget") && n.attr("input_forget")->i != 0;
  s.linear_before_reset = n.attr("linear_before_reset") && n.attr("linear_before_reset")->i != 0;
  s.cast_projections = cast_projections;
  s.activations = activations(n, s);
  return s;
}

// Slice [d, d+1) of axis 0, reshaped to `shape`.
Value* direction_of(GradBuilder& b, Value* v, int64_t d, std::vector<int64_t> shape) {
  if (!v) return nullptr;
  auto sliced_shape = shape;
  sliced_shape.insert(sliced_shape.begin(), 1);
  Value* s =
      b.op("Slice", {v, b.ints({d}), b.ints({d + 1}), b.ints({0})}, {v->type.dtype, sliced_shape});
  return b.reshape(s, shape);
}

Value* transpose(GradBuilder& b, Value* v, std::vector<int64_t> perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back((*v->type.shape)[static_cast<size_t>(p)]);
  return b.op("Transpose", {v}, {v->type.dtype, shape},
              attrs(ir::Attribute::make_ints("perm", perm)));
}

Value* concat(GradBuilder& b, const std::vector<Value*>& parts, int64_t axis) {
  if (parts.size() == 1) return parts[0];
  auto shape = *parts[0]->type.shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (Value* p : parts)
    shape[static_cast<size_t>(axis)] += (*p->type.shape)[static_cast<size_t>(axis)];
  return b.op("Concat", parts, {parts[0]->type.dtype, shape},
              attrs(ir::Attribute::make_int("axis", axis)));
}

// The node's outputs (Y, Y_h, Y_c) built from primitive ops appended to the graph.
std::vector<Value*> lower_node(GradBuilder& b, const ir::Node& n, const LayerSpec& s) {
  const bool batch_first = n.attr("layout") && n.attr("layout")->i != 0;
  const int64_t gh = s.gates() * s.hidden;
  Value* x = input(n, 0);
  if (batch_first) x = transpose(b, x, {1, 0, 2});
  Value* lengths = input(n, 4);
  if (lengths) {
    lengths = b.op("Cast", {lengths}, {DType::kInt64, std::vector<int64_t>{s.batch}},
                   attrs(ir::Attribute::make_int("to", static_cast<int64_t>(DType::kInt64))));
  }
  const size_t h0_index = 5, c0_index = 6, p_index = 7;
  auto initial = [&](size_t index, int64_t d) -> Value* {
    Value* v = input(n, index);
    if (!v) return nullptr;
    // The spec fixes the shape an initial state must have; exporters compute it with shape
    // arithmetic (torch: Expand of zeros to [layers*directions, batch, hidden]) that shape
    // inference may leave unknown.
    if (!v->type.is_static() && is_float(v->type.dtype)) {
      v->type.shape = batch_first ? std::vector<int64_t>{s.batch, s.directions, s.hidden}
                                  : std::vector<int64_t>{s.directions, s.batch, s.hidden};
    }
    // Batch-first initial states are [batch, directions, hidden].
    if (batch_first) {
      v = b.op("Transpose", {v},
               {v->type.dtype, std::vector<int64_t>{s.directions, s.batch, s.hidden}},
               attrs(ir::Attribute::make_ints("perm", {1, 0, 2})));
    }
    return direction_of(b, v, d, {s.batch, s.hidden});
  };
  std::vector<Value*> ys, hs, cs;
  for (int64_t d = 0; d < s.directions; ++d) {
    recurrent::DirectionInputs in;
    in.x = x;
    in.w = direction_of(b, input(n, 1), d, {gh, s.input});
    in.r = direction_of(b, input(n, 2), d, {gh, s.hidden});
    if (Value* bias = direction_of(b, input(n, 3), d, {2 * gh})) {
      const auto half = [&](int64_t begin) {
        return b.op("Slice", {bias, b.ints({begin}), b.ints({begin + gh}), b.ints({0})},
                    {bias->type.dtype, std::vector<int64_t>{gh}});
      };
      in.wb = half(0);
      in.rb = half(gh);
    }
    if (s.cell == CellKind::kLSTM) in.p = direction_of(b, input(n, p_index), d, {3 * s.hidden});
    in.h0 = initial(h0_index, d);
    if (s.cell == CellKind::kLSTM) in.c0 = initial(c0_index, d);
    in.lengths = lengths;
    const std::string* direction = n.attr("direction") ? &n.attr("direction")->s : nullptr;
    in.reverse = d == 1 || (direction && *direction == "reverse");
    in.first_activation =
        static_cast<size_t>(d) * s.activations.size() / static_cast<size_t>(s.directions);
    const auto out = recurrent::unroll_direction(b, s, in);
    std::vector<Value*> steps;
    for (Value* y : out.y) steps.push_back(b.reshape(y, {1, 1, s.batch, s.hidden}));
    ys.push_back(concat(b, steps, 0));  // [seq, 1, batch, hidden]
    hs.push_back(b.reshape(out.h, {1, s.batch, s.hidden}));
    if (out.c) cs.push_back(b.reshape(out.c, {1, s.batch, s.hidden}));
  }
  Value* y = concat(b, ys, 1);  // [seq, directions, batch, hidden]
  Value* y_h = concat(b, hs, 0);
  Value* y_c = cs.empty() ? nullptr : concat(b, cs, 0);
  if (batch_first) {
    y = transpose(b, y, {2, 0, 1, 3});
    y_h = transpose(b, y_h, {1, 0, 2});
    if (y_c) y_c = transpose(b, y_c, {1, 0, 2});
  }
  return {y, y_h, y_c};
}

// The node's outputs replaced by `outs` (which take their names), the node removed, and
// the new nodes (appended at the end of the graph) moved to where it was.
void splice(ir::Model& model, ir::Node* n, size_t first_new, const std::vector<Value*>& outs) {
  ir::Graph& g = *model.graph;
  g.move_tail_before(first_new, n);
  std::vector<std::pair<Value*, std::string>> renames;
  for (size_t k = 0; k < n->outputs.size(); ++k) {
    Value* old = n->outputs[k];
    if (!old) continue;
    Value* now = k < outs.size() ? outs[k] : nullptr;
    if (!now) refuse(*n, "output " + std::to_string(k) + " is not one the operator has");
    // A value a new node returns as is (a Reshape that changed nothing) gets an Identity,
    // so that it can take the output's name.
    if (now->is_graph_input || now->is_initializer() ||
        std::find(g.outputs.begin(), g.outputs.end(), now) != g.outputs.end()) {
      Value* copy = g.add_value(old->name + ".lowered", now->type);
      g.insert_node_before(n, "Identity", {now}, {copy}, old->name + ".lowered");
      now = copy;
    }
    ir::replace_all_uses(old, now);
    std::replace(g.outputs.begin(), g.outputs.end(), old, now);
    for (auto& u : model.state_updates) {
      if (u.source == old) u.source = now;
    }
    renames.emplace_back(now, old->name);
  }
  g.remove_node(n);
  for (auto& [v, name] : renames) g.rename_value(v, name);
}

}  // namespace

int lower_recurrent_layers(ir::Model& model, const RecurrentLoweringOptions& options) {
  ir::Graph& g = *model.graph;
  int lowered = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node* n = g.nodes[i].get();
    if (!n->domain.empty() || (n->op_type != "LSTM" && n->op_type != "GRU" && n->op_type != "RNN"))
      continue;
    const auto opset = model.opset_version("");
    if (!opset || *opset < 13)
      refuse(*n, "recurrent layers are lowered for opset 13 and later; the model imports opset " +
                     std::to_string(opset.value_or(0)));
    const LayerSpec spec = layer_spec(*n, options.cast_projections);
    const size_t first_new = g.nodes.size();
    const std::string prefix = (n->name.empty() ? n->op_type : n->name) + "/lowered";
    model.recurrent_lowerings.push_back({prefix + "/", n->op_type});
    GradBuilder b(g, prefix);
    const std::vector<Value*> outs = lower_node(b, *n, spec);
    const size_t added = g.nodes.size() - first_new;
    splice(model, n, first_new, outs);
    i += added - 1;  // the node itself is gone; continue after its replacement
    ++lowered;
  }
  return lowered;
}

}  // namespace ampc::passes
