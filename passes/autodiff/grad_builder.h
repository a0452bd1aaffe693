// Building gradient subgraphs: new nodes and constants with unique names and static types.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes::autodiff {

// Attributes are move-only (they may own subgraphs), so lists are built by moving.
template <typename... A>
std::vector<ir::Attribute> attrs(A&&... a) {
  std::vector<ir::Attribute> v;
  (v.push_back(std::forward<A>(a)), ...);
  return v;
}

class GradBuilder {
 public:
  GradBuilder(ir::Graph& graph, std::string prefix) : graph_(graph), prefix_(std::move(prefix)) {}

  // One node with one output of the given type; returns the output.
  ir::Value* op(const std::string& op_type, std::vector<ir::Value*> inputs, ir::TensorType out_type,
                std::vector<ir::Attribute> attributes = {}, const std::string& domain = "");
  // The same with several outputs.
  std::vector<ir::Value*> op_n(const std::string& op_type, std::vector<ir::Value*> inputs,
                               std::vector<ir::TensorType> out_types,
                               std::vector<ir::Attribute> attributes = {},
                               const std::string& domain = "");

  ir::Value* scalar(double value, DType dtype);                       // 0-d initializer
  ir::Value* ints(const std::vector<int64_t>& values);                // 1-D int64 initializer
  ir::Value* filled(double value, const ir::TensorType& type);        // initializer of one value
  ir::Value* floats(const std::vector<double>& values, DType dtype);  // 1-D float initializer

  // Sums `grad` over the dimensions that broadcasting expanded, so that it has `target`'s
  // shape (numpy broadcasting: leading dims added, size-1 dims stretched).
  ir::Value* reduce_to(ir::Value* grad, const ir::TensorType& target);
  ir::Value* reshape(ir::Value* x, const std::vector<int64_t>& shape);
  ir::Value* add(ir::Value* a, ir::Value* b);
  ir::Value* mul(ir::Value* a, ir::Value* b);
  // `x` as `to` (a Cast node; x itself when it already has that type).
  ir::Value* cast(ir::Value* x, DType to);
  // x with its last two axes swapped. Of a value that is itself such a swap (a Linear layer's
  // W^T, as torch exports it), the swapped value: the backward then reads W as it is, and the
  // forward transpose, read by its GEMM only, folds into that GEMM's call
  // (lower/gemm_epilogue.h).
  ir::Value* transpose_last(ir::Value* x);

  ir::Graph& graph() { return graph_; }

 private:
  std::string fresh(const std::string& what);

  ir::Graph& graph_;
  std::string prefix_;
  int counter_ = 0;
};

}  // namespace ampc::passes::autodiff
