#include "passes/transpose_to_gemm.h"

#include <string>
#include <vector>

#include "passes/cast_cleanup.h"

namespace ampc::passes {
namespace {

bool is_onnx(const ir::Node* n, const char* op) {
  return n && n->op_type == op && (n->domain.empty() || n->domain == "ai.onnx");
}

bool is_scalar_op(const ir::Node& n) {
  for (const char* op : {"Mul", "Div", "Add", "Sub"}) {
    if (is_onnx(&n, op)) return n.inputs.size() == 2 && n.outputs.size() == 1;
  }
  for (const char* op : {"Cast", "Neg"}) {
    if (is_onnx(&n, op)) return n.inputs.size() == 1 && n.outputs.size() == 1;
  }
  return false;
}

// A value of static shape that broadcasts as one element against a tensor of rank `rank`
// without raising the result's rank.
bool is_scalar(const ir::Value* v, size_t rank) {
  if (!v || !v->type.shape || !v->type.is_static() || v->type.shape->size() > rank) return false;
  for (int64_t d : *v->type.shape) {
    if (d != 1) return false;
  }
  return true;
}

// The index of the op's operand that `moved` would carry, when every other operand is a
// scalar; -1 otherwise.
int moving_operand(const ir::Node& op, const ir::Value* moved) {
  if (!moved->type.shape) return -1;
  int index = -1;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (op.inputs[i] == moved && index < 0) {
      index = static_cast<int>(i);
    } else if (!is_scalar(op.inputs[i], moved->type.shape->size())) {
      return -1;
    }
  }
  return index;
}

const ir::Node* only_reader(const ir::Value* v) {
  return v && v->uses.size() == 1 ? v->uses[0].node : nullptr;
}

bool read_by_gemms_or_transposes(const ir::Value* v) {
  if (v->uses.empty()) return false;
  for (const ir::Use& u : v->uses) {
    const bool gemm_operand = is_onnx(u.node, "MatMul") && u.input_index <= 1;
    if (!gemm_operand && !is_onnx(u.node, "Transpose")) return false;
  }
  return true;
}

std::string fresh_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.find_value(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

class Mover {
 public:
  explicit Mover(ir::Model& model) : model_(model), g_(*model.graph) {}

  // E(Transpose(x), s) -> Transpose(E(x, s)).
  bool after_op(ir::Node* t) {
    ir::Value* x = t->inputs[0];
    ir::Value* tx = t->outputs[0];
    ir::Node* op = const_cast<ir::Node*>(only_reader(tx));
    if (!x || !x->type.shape || !op || !is_scalar_op(*op) || pinned(tx)) return false;
    const int k = moving_operand(*op, tx);
    ir::Value* e = op->outputs[0];
    if (k < 0 || !e || pinned(e) || !read_by_gemms_or_transposes(e)) return false;
    ir::Value* ex = g_.add_value(fresh_name(g_, e->name + "/untransposed"),
                                 ir::TensorType{e->type.dtype, x->type.shape});
    ir::set_input(op, static_cast<size_t>(k), x);
    ir::set_output(op, 0, ex);
    ir::set_input(t, 0, ex);
    ir::set_output(t, 0, e);
    g_.move_node_after(t, op);
    return true;
  }

  // Transpose(E(y, s)), y a MatMul's result read only by E -> E(Transpose(y), s).
  bool before_op(ir::Node* t) {
    ir::Value* e = t->inputs[0];
    ir::Value* te = t->outputs[0];
    ir::Node* op = e ? e->producer : nullptr;
    if (!op || !is_scalar_op(*op) || only_reader(e) != t || pinned(e) || pinned(te)) return false;
    int k = -1;
    for (size_t i = 0; i < op->inputs.size() && k < 0; ++i) {
      const ir::Value* y = op->inputs[i];
      if (y && is_onnx(y->producer, "MatMul") && only_reader(y) == op && !pinned(y))
        k = moving_operand(*op, y);
    }
    if (k < 0 || !te->type.shape) return false;
    ir::Value* y = op->inputs[static_cast<size_t>(k)];
    ir::Value* ty = g_.add_value(fresh_name(g_, y->name + "/transposed"),
                                 ir::TensorType{y->type.dtype, te->type.shape});
    ir::set_input(t, 0, y);
    ir::set_output(t, 0, ty);
    ir::set_input(op, static_cast<size_t>(k), ty);
    ir::set_output(op, 0, te);
    g_.move_node_before(t, op);
    return true;
  }

 private:
  bool pinned(const ir::Value* v) const { return is_pinned_value(model_, v); }

  ir::Model& model_;
  ir::Graph& g_;
};

}  // namespace

int move_transposes_to_gemms(ir::Model& model) {
  std::vector<ir::Node*> transposes;
  for (const auto& np : model.graph->nodes) {
    if (is_onnx(np.get(), "Transpose") && np->inputs.size() == 1 && np->outputs.size() == 1)
      transposes.push_back(np.get());
  }
  Mover mover(model);
  int moved = 0;
  for (ir::Node* t : transposes) {
    if (mover.after_op(t) || mover.before_op(t)) ++moved;
  }
  return moved;
}

}  // namespace ampc::passes
