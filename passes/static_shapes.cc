#include "passes/static_shapes.h"

#include <optional>
#include <set>

#include "base/error.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/input_shapes.h"
#include "frontend/onnx/proto_convert.h"
#include "passes/constant_folding.h"

namespace ampc::passes {
namespace {

// Whether `inferred` says more than `known` and agrees with it where both know a dimension.
bool refines(const ir::TensorType& known, const ir::TensorType& inferred) {
  if (!inferred.shape || known.is_static()) return false;
  if (known.dtype != DType::kUndefined && inferred.dtype != known.dtype) return false;
  if (!known.shape) return true;
  if (known.shape->size() != inferred.shape->size()) return false;
  bool more = false;
  for (size_t k = 0; k < known.shape->size(); ++k) {
    const int64_t a = (*known.shape)[k], b = (*inferred.shape)[k];
    if (a >= 0 && b >= 0 && a != b) return false;
    more |= a < 0 && b >= 0;
  }
  return more;
}

bool has_unknown_shape(const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    for (const ir::Value* v : n->outputs) {
      if (v && !v->type.is_static()) return true;
    }
  }
  return false;
}

// ONNX shape inference over the current graph; returns how many values learnt a shape.
int infer_again(ir::Model& model) {
  onnx::ModelProto proto = onnx_io::export_model(model);
  // Stale partial shapes would be merged into the new ones; inference recomputes them. Static
  // ones stay: some come from rules ONNX's inference lacks (shapes_from_constants).
  auto* infos = proto.mutable_graph()->mutable_value_info();
  for (auto& vi : *infos) {
    const ir::Value* v = model.graph->find_value(vi.name());
    if (vi.type().has_tensor_type() && !(v && v->type.is_static()))
      vi.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  try {
    onnx_io::infer_shapes(proto);
  } catch (const Error&) {
    return 0;  // the final check names what stays unknown
  }
  int learnt = 0;
  auto adopt = [&](const onnx::ValueInfoProto& vi) {
    ir::Value* v = model.graph->find_value(vi.name());
    if (!v || v->owner != model.graph.get() || !vi.type().has_tensor_type()) return;
    ir::TensorType inferred;
    try {
      inferred = onnx_io::type_from_proto(vi.type(), vi.name());
    } catch (const Error&) {
      return;
    }
    if (!refines(v->type, inferred)) return;
    v->type = inferred;
    ++learnt;
  };
  for (const auto& vi : proto.graph().value_info()) adopt(vi);
  for (const auto& vi : proto.graph().output()) adopt(vi);
  return learnt;
}

// A numeric one-element initializer as an integer (OneHot's depth may be of any numeric type).
std::optional<int64_t> scalar_of(const ir::Value* v) {
  const ir::Tensor* t = v ? v->initializer.get() : nullptr;
  if (!t || t->numel() != 1) return std::nullopt;
  switch (t->dtype) {
    case DType::kInt64:
      return ir::load_element<int64_t>(t->bytes.data(), 0);
    case DType::kInt32:
      return ir::load_element<int32_t>(t->bytes.data(), 0);
    case DType::kFloat32:
      return static_cast<int64_t>(ir::load_element<float>(t->bytes.data(), 0));
    case DType::kFloat64:
      return static_cast<int64_t>(ir::load_element<double>(t->bytes.data(), 0));
    default:
      return std::nullopt;
  }
}

// Shapes ONNX's inference leaves unknown although constant inputs decide them: OneHot's new
// axis has the depth's size (torch's F.one_hot writes the depth as a constant). Returns how
// many values learnt a shape.
int shapes_from_constants(ir::Model& model) {
  int learnt = 0;
  for (const auto& n : model.graph->nodes) {
    if (n->op_type != "OneHot" || !n->domain.empty() || n->inputs.size() < 2 ||
        n->outputs.empty() || !n->outputs[0] || n->outputs[0]->type.is_static() ||
        !n->inputs[0]->type.is_static())
      continue;
    const std::optional<int64_t> depth = scalar_of(n->inputs[1]);
    if (!depth || *depth < 1) continue;
    std::vector<int64_t> shape = *n->inputs[0]->type.shape;
    const auto rank = static_cast<int64_t>(shape.size()) + 1;
    const ir::Attribute* a = n->attr("axis");
    int64_t axis = a ? a->i : -1;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) continue;
    shape.insert(shape.begin() + axis, *depth);
    n->outputs[0]->type.shape = shape;
    ++learnt;
  }
  return learnt;
}

// Inputs that decide an op's output shape by their values (not only by their shapes).
bool is_shape_input(const ir::Node& n, size_t k) {
  static const std::set<std::string> kAllInputs = {"ConstantOfShape", "Range", "NonZero",
                                                   "Compress", "Unique"};
  if (kAllInputs.count(n.op_type)) return true;
  if (n.op_type == "Einsum") return false;  // operands only: shaped by the equation
  return k > 0;
}

// Where a run-time value comes from: the first node up its producer chain whose inputs are
// all constants (constant folding could not evaluate it), or the graph input it reads.
std::string origin(const ir::Value* v) {
  std::set<const ir::Value*> seen;
  std::vector<const ir::Value*> todo{v};
  while (!todo.empty()) {
    const ir::Value* cur = todo.back();
    todo.pop_back();
    if (!cur || cur->initializer || !seen.insert(cur).second) continue;
    if (!cur->producer) return "; it depends on graph input '" + cur->name + "'";
    bool all_constant = true;
    for (const ir::Value* in : cur->producer->inputs) {
      if (in && !in->initializer) {
        all_constant = false;
        todo.push_back(in);
      }
    }
    if (all_constant) {
      return "; node " + cur->producer->label() +
             " has only constant inputs but constant folding cannot evaluate it";
    }
  }
  return "";
}

}  // namespace

int fold_static_shapes(ir::Model& model) {
  int folded = fold_constants(model);
  if (!model.state_updates.empty()) return folded;
  // Each round folds what the last inference made constant and infers what the fold made
  // known; a few rounds suffice (one per level of shape arithmetic between two shapes).
  for (int round = 0; round < 32 && has_unknown_shape(*model.graph); ++round) {
    const int learnt = infer_again(model) + shapes_from_constants(model);
    const int more = fold_constants(model);
    folded += more;
    if (learnt == 0 && more == 0) break;
  }
  return folded;
}

void require_static_shapes(const ir::Graph& graph, const std::string& why) {
  for (const auto& n : graph.nodes) {
    for (const ir::Value* out : n->outputs) {
      if (!out || out->type.is_static()) continue;
      std::string msg = why + ": the shape of '" + out->name + "' (" + out->type.str() +
                        "), output of node " + n->label() + ", is unknown";
      // Control flow decides its shapes in its body at run time; say so rather than name an
      // input (torch exports nn.EmbeddingBag and loops over data-dependent counts this way).
      if (n->op_type == "Loop" || n->op_type == "Scan" || n->op_type == "If")
        throw Error(msg + ": control flow (" + n->op_type +
                    ") is not supported for training; torch.onnx.export writes nn.EmbeddingBag "
                    "as a Loop (ampc.export traces it as an Embedding and the bags' sum, "
                    "mean or max, bags given by offsets included)");
      if (n->op_type == "NonZero")
        throw Error(msg +
                    ": boolean-mask selection (x[mask], torch.masked_select) trains "
                    "only where the selected elements reach a sum, a mean or a "
                    "cross-entropy / NLL loss through elementwise ops (docs/training.md); "
                    "else mask the loss: (loss * mask).sum() / mask.sum()");
      for (size_t k = 0; k < n->inputs.size(); ++k) {
        const ir::Value* in = n->inputs[k];
        if (!in) continue;
        if (!in->type.is_static()) {
          throw Error(msg + ": its input '" + in->name + "' is " + in->type.str());
        }
      }
      for (size_t k = 0; k < n->inputs.size(); ++k) {
        const ir::Value* in = n->inputs[k];
        if (!in || in->initializer || !is_shape_input(*n, k)) continue;
        throw Error(msg + ": its input " + std::to_string(k) + " '" + in->name +
                    "' is computed at run time" +
                    (in->producer ? " by node " + in->producer->label() : std::string()) +
                    ", not a constant" + origin(in));
      }
      throw Error(msg + " (ONNX shape inference gives no shape for operator '" + n->op_type +
                  "' here)");
    }
  }
}

}  // namespace ampc::passes
