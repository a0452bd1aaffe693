#include "frontend/onnx/soft_target_cross_entropy.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "frontend/onnx/input_shapes.h"

namespace ampc::onnx_io {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

// Element type and rank (-1: unknown) of every value the graph declares a type for.
struct ValueType {
  int elem_type = 0;
  int rank = -1;
};

std::unordered_map<std::string, ValueType> declared_types(const onnx::GraphProto& g) {
  std::unordered_map<std::string, ValueType> types;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    const auto& t = v.type().tensor_type();
    types[v.name()] = {t.elem_type(), t.has_shape() ? t.shape().dim_size() : -1};
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  for (const auto& t : g.initializer()) types[t.name()] = {t.data_type(), t.dims_size()};
  return types;
}

bool is_float_elem(int t) {
  return t == TensorProto::FLOAT || t == TensorProto::DOUBLE || t == TensorProto::FLOAT16 ||
         t == TensorProto::BFLOAT16;
}

std::string label(const NodeProto& n, int index) {
  return "node '" + (n.name().empty() ? "#" + std::to_string(index) : n.name()) +
         "' (SoftmaxCrossEntropyLoss)";
}

class Expander {
 public:
  Expander(onnx::GraphProto& g, int64_t opset) : g_(g), opset_(opset) {}

  // The nodes standing for node `n` (the `index`-th), which reads float probabilities.
  std::vector<NodeProto> expand(const NodeProto& n, int index, int scores_rank) {
    prefix_ = (n.name().empty() ? "soft_ce_" + std::to_string(index) : n.name()) + "/";
    out_.clear();
    std::string reduction = "mean";
    for (const auto& a : n.attribute()) {
      if (a.name() == "reduction") reduction = a.s();
    }
    if (reduction != "mean" && reduction != "sum" && reduction != "none")
      throw Error(label(n, index) + ": unknown reduction '" + reduction + "'");
    // Before opset 13 LogSoftmax normalises over every axis from `axis` on, not over axis 1.
    if (opset_ < 13 && scores_rank != 2)
      throw Error(label(n, index) + ": probability targets " +
                  (scores_rank < 0 ? std::string("of unknown rank")
                                   : "of rank " + std::to_string(scores_rank)) +
                  " need opset 13 or later (the model has " + std::to_string(opset_) + ")");
    const bool has_weight = n.input_size() > 2 && !n.input(2).empty();
    if (has_weight && scores_rank < 2)
      throw Error(label(n, index) +
                  ": class weights with probability targets need the scores' rank");
    const std::string log_prob =
        n.output_size() > 1 && !n.output(1).empty() ? n.output(1) : prefix_ + "log_prob";
    node("LogSoftmax", {n.input(0)}, log_prob).add_attribute()->CopyFrom(int_attr("axis", 1));
    std::string weighted = node_out("Mul", {log_prob, n.input(1)}, "target_log_prob");
    if (has_weight) {
      std::vector<int64_t> shape(static_cast<size_t>(scores_rank - 1), 1);
      shape[0] = -1;  // [C, 1, ...]: broadcasts over axis 1 of the scores
      const std::string w =
          node_out("Reshape", {n.input(2), int64_initializer("weight_shape", shape)}, "weight");
      weighted = node_out("Mul", {weighted, w}, "weighted");
    }
    const std::string summed = reduce("ReduceSum", weighted, {1}, prefix_ + "class_sum");
    if (reduction == "none") {
      node("Neg", {summed}, n.output(0));
    } else {
      const std::string per = node_out("Neg", {summed}, "per_element");
      reduce(reduction == "mean" ? "ReduceMean" : "ReduceSum", per, {}, n.output(0));
    }
    return out_;
  }

 private:
  NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                  const std::string& output) {
    NodeProto& n = out_.emplace_back();
    n.set_op_type(op);
    n.set_name(prefix_ + op + "_" + std::to_string(out_.size()));
    for (const auto& i : inputs) n.add_input(i);
    n.add_output(output);
    return n;
  }
  std::string node_out(const std::string& op, const std::vector<std::string>& inputs,
                       const std::string& what) {
    const std::string name = prefix_ + what;
    node(op, inputs, name);
    return name;
  }
  // ReduceSum / ReduceMean over `axes` (none: every axis), keepdims 0, in the opset's form
  // (axes an input of ReduceSum from opset 13 and of ReduceMean from 18, else an attribute).
  std::string reduce(const std::string& op, const std::string& x, std::vector<int64_t> axes,
                     const std::string& name) {
    const bool axes_input = opset_ >= (op == "ReduceSum" ? 13 : 18);
    std::vector<std::string> inputs = {x};
    if (!axes.empty() && axes_input) inputs.push_back(int64_initializer("axes", axes));
    NodeProto& n = node(op, inputs, name);
    n.add_attribute()->CopyFrom(int_attr("keepdims", 0));
    if (!axes.empty() && !axes_input) {
      auto* a = n.add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : axes) a->add_ints(v);
    }
    return name;
  }
  std::string int64_initializer(const std::string& what, const std::vector<int64_t>& values) {
    TensorProto* t = g_.add_initializer();
    t->set_name(prefix_ + what);
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t->name();
  }
  static onnx::AttributeProto int_attr(const std::string& name, int64_t v) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(v);
    return a;
  }

  onnx::GraphProto& g_;
  int64_t opset_;
  std::string prefix_;
  std::vector<NodeProto> out_;
};

// The model's types as shape inference gives them, from a sketch of it: its nodes and
// inputs, small initializers (shape constants), the large ones as typed graph inputs, and the
// graph outputs without their declared shapes (torch declares the loss's real shape, which
// the operator's own inference for float labels would contradict). Copies no weights.
onnx::ModelProto inferred_sketch(const onnx::ModelProto& proto) {
  constexpr int64_t kSmall = 64;  // elements of an initializer copied as it is
  onnx::ModelProto sketch;
  sketch.set_ir_version(proto.ir_version());
  *sketch.mutable_opset_import() = proto.opset_import();
  const onnx::GraphProto& g = proto.graph();
  onnx::GraphProto& s = *sketch.mutable_graph();
  s.set_name(g.name());
  *s.mutable_node() = g.node();
  *s.mutable_input() = g.input();
  std::unordered_set<std::string> inputs;
  for (const auto& v : g.input()) inputs.insert(v.name());
  for (const auto& t : g.initializer()) {
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    if (n <= kSmall) {
      *s.add_initializer() = t;
    } else if (!inputs.count(t.name())) {
      onnx::ValueInfoProto* v = s.add_input();
      v->set_name(t.name());
      auto* tt = v->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  for (const auto& o : g.output()) {
    onnx::ValueInfoProto* v = s.add_output();
    v->set_name(o.name());
    if (o.type().has_tensor_type())
      v->mutable_type()->mutable_tensor_type()->set_elem_type(o.type().tensor_type().elem_type());
  }
  infer_shapes(sketch);
  return sketch;
}

}  // namespace

int expand_soft_target_cross_entropy(onnx::ModelProto& proto) {
  onnx::GraphProto& g = *proto.mutable_graph();
  auto is_loss = [](const NodeProto& n) {
    return n.op_type() == "SoftmaxCrossEntropyLoss" &&
           (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() >= 2;
  };
  // Labels of a known integer type are the operator's own: nothing to learn or rewrite.
  auto types = declared_types(g);
  bool unknown = false;
  for (const auto& n : g.node()) {
    if (!is_loss(n)) continue;
    auto it = types.find(n.input(1));
    unknown |=
        it == types.end() || it->second.elem_type == 0 || is_float_elem(it->second.elem_type);
  }
  if (!unknown) return 0;
  types = declared_types(inferred_sketch(proto).graph());
  auto type_of = [&](const std::string& name) {
    auto it = types.find(name);
    return it == types.end() ? ValueType{} : it->second;
  };
  int64_t opset = 0;
  for (const auto& o : proto.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  std::vector<NodeProto> nodes;
  Expander expander(g, opset);
  int rewritten = 0;
  for (int i = 0; i < g.node_size(); ++i) {
    const NodeProto& n = g.node(i);
    if (!is_loss(n) || !is_float_elem(type_of(n.input(1)).elem_type)) {
      nodes.push_back(n);
      continue;
    }
    for (auto& e : expander.expand(n, i, type_of(n.input(0)).rank)) nodes.push_back(std::move(e));
    ++rewritten;
  }
  if (rewritten == 0) return 0;
  g.clear_node();
  for (auto& n : nodes) *g.add_node() = std::move(n);
  return rewritten;
}

}  // namespace ampc::onnx_io
