// The IR: a model owns a graph; a graph owns its nodes (kept in topological order) and its
// values; values know their producer and their uses. Subgraphs of If/Loop/Scan hang off
// graph-valued attributes and may read values of enclosing graphs by pointer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace ampc::ir {

class Graph;
class Node;

// Element type and shape of a value. `shape` is empty when even the rank is unknown;
// a dimension of -1 is unknown. Graph inputs always have fully static shapes.
struct TensorType {
  DType dtype = DType::kUndefined;
  std::optional<std::vector<int64_t>> shape;

  bool is_static() const;
  std::string str() const;  // "f32[32,64]", "i64[]", "f32[?]", "?"
  bool operator==(const TensorType&) const = default;
};

// The part of a training step a node computes. The pipeline sets Graph::build_phase while it
// builds each part (driver/pipeline.cc); the plan records it per step (Step.phase), so that
// reports and the non-finite search need not guess it from node names.
enum class Phase : uint8_t {
  kUnknown,
  kForward,
  kBackward,
  kLossScaling,  // scale, unscale and check, clip, accumulate, the scale's update
  kOptimizer,
  kStatistics,  // --grad-stats range statistics
};

struct Use {
  Node* node;
  int input_index;
};

class Value {
 public:
  std::string name;
  TensorType type;
  Graph* owner = nullptr;
  Node* producer = nullptr;  // null for graph inputs and initializers
  int producer_output = -1;
  std::vector<Use> uses;
  bool is_graph_input = false;
  std::unique_ptr<Tensor> initializer;  // constant data when the value is an initializer
  // An initializer of the source model (a parameter candidate for training), as opposed
  // to constants that passes create (folded Constant nodes, gradient seeds, ...).
  bool from_model = false;
  std::string doc_string;

  bool is_initializer() const { return initializer != nullptr; }
};

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;                 // "" is the default ONNX domain
  std::vector<Value*> inputs;         // nullptr marks an omitted optional input
  std::vector<Value*> outputs;        // nullptr marks an omitted optional output
  std::vector<Attribute> attributes;  // in file order
  std::string doc_string;
  Graph* owner = nullptr;
  Phase phase = Phase::kUnknown;  // the owner's build_phase when the node was added

  const Attribute* attr(std::string_view attr_name) const;
  // "name (OpType)" or "#index (OpType)" for unnamed nodes: how messages point at a node.
  std::string label() const;
};

class Graph {
 public:
  std::string name;
  std::string doc_string;
  Graph* parent = nullptr;                   // enclosing graph, for subgraphs
  std::vector<std::unique_ptr<Node>> nodes;  // topological order
  std::vector<std::unique_ptr<Value>> values;
  std::vector<Value*> inputs;           // declared graph inputs, in order
  std::vector<Value*> outputs;          // declared graph outputs, in order
  std::vector<Value*> initializers;     // in file order
  Phase build_phase = Phase::kUnknown;  // given to each node add_node appends

  Value* add_value(std::string value_name, TensorType type = {});
  // Appends a node; wires producer and use links of the given values.
  Node* add_node(std::string op_type, std::vector<Value*> node_inputs,
                 std::vector<Value*> node_outputs, std::string node_name = {},
                 std::string node_domain = {});
  // add_node, with the node placed just before `pos` (a node of this graph) in the node
  // order instead of at the end; a null `pos` is the end.
  Node* insert_node_before(const Node* pos, std::string op_type, std::vector<Value*> node_inputs,
                           std::vector<Value*> node_outputs, std::string node_name = {},
                           std::string node_domain = {});
  // add_node, with the node placed just after `pos`; a null `pos` is the front.
  Node* insert_node_after(const Node* pos, std::string op_type, std::vector<Value*> node_inputs,
                          std::vector<Value*> node_outputs, std::string node_name = {},
                          std::string node_domain = {});
  // Moves a node of this graph to just before `pos` (null: to the end) or just after `pos`
  // (null: to the front). The caller keeps the order topological.
  void move_node_before(Node* node, const Node* pos);
  void move_node_after(Node* node, const Node* pos);
  // Moves nodes[first..end) (typically what a builder just appended), in their order, to
  // just before `pos`, a node before index `first`.
  void move_tail_before(size_t first, const Node* pos);
  // Removes a node whose outputs nobody reads (and that are not graph outputs), with its
  // output values; unlinks its uses of its inputs.
  void remove_node(Node* node);
  // remove_node for several nodes at once, in one sweep over the graph (no output of one may
  // be read by another node that stays).
  void remove_nodes(const std::vector<Node*>& dead);
  // Removes a node but keeps its output values, which another definition takes over (an
  // initializer, a node that writes them): those still naming this node as their producer
  // lose it. Unlinks its uses of its inputs.
  void detach_node(Node* node);
  // A value of this graph or of an enclosing one, by name; null when absent. Indexed: values
  // must be renamed through rename_value, not by assigning Value::name.
  Value* find_value(std::string_view value_name) const;
  void rename_value(Value* value, std::string new_name);
  // Removes the values (not used by any node) for which pred(const Value&) holds.
  template <typename Pred>
  void erase_values_if(Pred pred) {
    std::erase_if(values, [&](const std::unique_ptr<Value>& v) {
      if (!pred(static_cast<const Value&>(*v))) return false;
      unindex(v.get());
      return true;
    });
  }
  // Visits this graph and every nested subgraph, parents first.
  template <typename F>
  void for_each_graph(F&& f) const;

 private:
  void unindex(Value* value);
  // Values by name, in the order they were added (names are not necessarily unique while a
  // graph is being built); kept by add_value, rename_value and remove_node.
  std::unordered_map<std::string, std::vector<Value*>> by_name_;
  using NodeIterator = std::vector<std::unique_ptr<Node>>::iterator;
  NodeIterator position_of(const Node* node);  // throws when the node is not in `nodes`
  // Moves the node at `it` to just before `at`.
  void move_node_to(NodeIterator it, NodeIterator at);
};

// Mutation of the def-use links. Passes never assign Node::inputs, Node::outputs entries or
// Value::uses themselves: these functions keep each value's use list equal to the (node,
// input index) pairs that read it, which the verifier checks.

// Points input `k` (< inputs.size()) of `n` at `v`: the old input's use entry for (n, k) goes,
// `v` lists (n, k) last. `v` may be null (an omitted optional input).
void set_input(Node* n, size_t k, Value* v);
// set_input for the reader of one use: the reader reads `to` there instead.
void replace_use(const Use& use, Value* to);
// Every node that reads `from` (subgraph nodes included) reads `to` instead, in the order of
// `from`'s use list; `from` is left without uses. A null `to` leaves those inputs omitted.
// Graph outputs and state updates are not uses: they keep naming `from`.
void replace_all_uses(Value* from, Value* to);
// Drops the trailing omitted (null) inputs of `n`: how ONNX writes omitted optional inputs
// at the end.
void trim_omitted_inputs(Node* n);
// Makes `v` (a value without a producer, or null) output `k` of `n`; outputs grow with
// omitted ones when k is past the end. `v`'s producer becomes (n, k); the value it replaces,
// if still produced there, has no producer any more.
void set_output(Node* n, size_t k, Value* v);
// Replaces `node` (one output) by the nodes appended to `g` from index `first_new` on, one
// of which produces `result` (output 0): they take node's place in the order, and result's
// producer writes node's output value instead, so its readers, graph outputs and state updates
// keep naming that value. `result` itself is removed.
void replace_by_appended(Graph& g, Node* node, size_t first_new, Value* result);
// Whether `n` has its first output and every input and output it has is of a static type: what
// a rewrite that builds its replacement from the shapes needs.
bool has_static_types(const Node& n);
// The same for a node of several outputs: results[i] (of any appended node, any of its outputs)
// stands for node's output i; a null entry for an output the node does not have.
void replace_by_appended(Graph& g, Node* node, size_t first_new,
                         const std::vector<Value*>& results);

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
  bool operator==(const OpsetImport&) const = default;
};

class Model {
 public:
  int64_t ir_version = 8;
  std::vector<OpsetImport> opsets;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  // Training: after each step, `target` (an initializer: parameter or optimizer state)
  // takes the value of `source` (as ONNX's TrainingInfoProto update_binding). Sources are
  // live like graph outputs.
  struct StateUpdate {
    Value* target;
    Value* source;
  };
  std::vector<StateUpdate> state_updates;
  // Mixed-precision training: `copy` (a state initializer) is `master` (a trained parameter)
  // rounded to a 16-bit type, kept by the optimizer's own update (passes/weight_copies.h).
  // Backends recompute it from the master whenever the master is set from outside.
  struct RoundedCopy {
    Value* copy;
    Value* master;
  };
  std::vector<RoundedCopy> rounded_copies;
  // Nodes a lowering made of an op that PyTorch's autocast computes in fp32 (GridSample, its
  // grid_sampler): the name prefix they share and the op. Autocast keeps them in fp32
  // (passes/precision_policy.h).
  struct Fp32Lowering {
    std::string node_prefix;
    std::string op;
  };
  std::vector<Fp32Lowering> fp32_lowerings;
  // Nodes the recurrent lowering made of one LSTM, GRU or RNN node (passes/recurrent_lowering.h):
  // the name prefix they share. PyTorch runs such a layer as one library call (cuDNN's or
  // oneDNN's RNN), which sums a weight's gradient over the time steps in one product with one
  // rounding; a 16-bit plan does the same for the sums of these nodes' gradients
  // (passes/summed_matmuls.h) and keeps the per-step roundings of other sums.
  struct RecurrentLowering {
    std::string node_prefix;
    std::string op;
  };
  std::vector<RecurrentLowering> recurrent_lowerings;
  // fp32 chains autocast made of a 16-bit activation (torch's GELU, passes/erf_gelu.h): their
  // nodes (the Cast up first) by name, and the 16-bit source. What the backward reads of them
  // is computed again there from the source, which it keeps instead, as PyTorch's gelu saves
  // its input (passes/recompute_elementwise.h, recompute_low_chains).
  struct LowSourceChain {
    std::string source;
    std::vector<std::string> nodes;
  };
  std::vector<LowSourceChain> low_source_chains;

  // The opset version imported for a domain ("" and "ai.onnx" are the same); nullopt if none.
  std::optional<int64_t> opset_version(std::string_view op_domain) const;
};

template <typename F>
void Graph::for_each_graph(F&& f) const {
  f(*this);
  for (const auto& n : nodes) {
    for (const auto& a : n->attributes) {
      if (a.g) a.g->for_each_graph(f);
      for (const auto& g : a.graphs) g->for_each_graph(f);
    }
  }
}

}  // namespace ampc::ir
