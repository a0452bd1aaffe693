#include "frontend/onnx/training_info.h"

#include <set>
#include <string>

#include "base/error.h"

namespace ampc::onnx_io {
namespace {

template <typename List>
std::set<std::string> names_of(const List& list) {
  std::set<std::string> names;
  for (const auto& item : list) names.insert(item.name());
  return names;
}

// Appends every element of `from` to `to`.
template <typename List>
void append(const List& from, List* to) {
  for (const auto& item : from) *to->Add() = item;
}

}  // namespace

void check_training_info(const onnx::ModelProto& proto) {
  if (proto.training_info_size() == 0) return;
  if (proto.training_info_size() > 1) {
    throw Error("the model has " + std::to_string(proto.training_info_size()) +
                " TrainingInfoProtos; only one (a single training step) is supported");
  }
  const onnx::TrainingInfoProto& info = proto.training_info(0);
  const onnx::GraphProto& init = info.initialization();
  if (init.node_size() > 0 || init.output_size() > 0 || info.initialization_binding_size() > 0) {
    throw Error(
        "training_info: initialization graphs are not supported (the initializers' "
        "values are the initial state)");
  }
  const onnx::GraphProto& algorithm = info.algorithm();
  std::set<std::string> initializers = names_of(proto.graph().initializer());
  initializers.merge(names_of(algorithm.initializer()));
  std::set<std::string> outputs = names_of(proto.graph().output());
  outputs.merge(names_of(algorithm.output()));
  std::set<std::string> keys;
  for (const auto& b : info.update_binding()) {
    if (!initializers.count(b.key())) {
      throw Error("training_info update_binding '" + b.key() + "' <- '" + b.value() + "': '" +
                  b.key() + "' is not an initializer of the main graph or the algorithm");
    }
    if (!keys.insert(b.key()).second) {
      throw Error("training_info update_binding: initializer '" + b.key() + "' is bound twice");
    }
    if (!outputs.count(b.value())) {
      throw Error("training_info update_binding '" + b.key() + "' <- '" + b.value() + "': '" +
                  b.value() + "' is not an output of the algorithm or the main graph");
    }
  }
}

onnx::ModelProto combined_training_model(const onnx::ModelProto& proto) {
  check_training_info(proto);
  onnx::ModelProto combined = proto;
  combined.clear_training_info();
  if (proto.training_info_size() == 0) return combined;
  const onnx::GraphProto& algorithm = proto.training_info(0).algorithm();
  onnx::GraphProto* g = combined.mutable_graph();
  append(algorithm.input(), g->mutable_input());
  append(algorithm.initializer(), g->mutable_initializer());
  append(algorithm.node(), g->mutable_node());
  append(algorithm.value_info(), g->mutable_value_info());
  append(algorithm.output(), g->mutable_output());
  if (algorithm.sparse_initializer_size() > 0) {
    throw Error("training_info algorithm: sparse initializer '" +
                algorithm.sparse_initializer(0).values().name() + "' is not supported");
  }
  return combined;
}

}  // namespace ampc::onnx_io
