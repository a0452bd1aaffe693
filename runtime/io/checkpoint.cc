#include "runtime/io/checkpoint.h"

#include <set>

#include "base/error.h"
#include "base/file_util.h"
#include "runtime/io/tensor_pb.h"

namespace ampc::rt::io {
namespace {

constexpr const char* kStepKey = "ampc.checkpoint.step";
constexpr const char* kPositionKey = "ampc.checkpoint.data_position";

// Every initializer of the main graph and of the (single) training algorithm.
template <typename Model, typename F>
void for_each_initializer(Model& model, F&& f) {
  for (auto& init : *model.mutable_graph()->mutable_initializer()) f(init);
  for (auto& info : *model.mutable_training_info()) {
    for (auto& init : *info.mutable_algorithm()->mutable_initializer()) f(init);
  }
}

int64_t metadata_int(const onnx::ModelProto& model, const std::string& key,
                     const std::string& path) {
  for (const auto& p : model.metadata_props()) {
    if (p.key() != key) continue;
    try {
      return std::stoll(p.value());
    } catch (const std::exception&) {
      throw Error("checkpoint '" + path + "': metadata " + key + " = '" + p.value() +
                  "' is not an integer");
    }
  }
  throw Error("checkpoint '" + path + "' has no " + key +
              " metadata (not written by `ampc train --checkpoint`)");
}

}  // namespace

onnx::ModelProto model_with_state(const plan::Plan& plan,
                                  const std::map<std::string, Tensor>& state) {
  if (plan.training_model().empty()) {
    throw Error(
        "the plan embeds no training model (it is a forward plan, or was compiled by an "
        "older ampc); compile it again with `ampc compile --train`");
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(plan.training_model()))
    throw Error("the plan's embedded training model is not a valid ONNX model");
  std::set<std::string> filled;
  for_each_initializer(model, [&](onnx::TensorProto& init) {
    auto it = state.find(init.name());
    if (it == state.end()) return;
    init = tensor_to_onnx(it->second, init.name());
    filled.insert(init.name());
  });
  for (const auto& [name, value] : state) {
    if (!filled.count(name)) {
      throw Error("state '" + name + "' is not an initializer of the plan's training model");
    }
  }
  return model;
}

void write_checkpoint(const plan::Plan& plan, const std::map<std::string, Tensor>& state,
                      const TrainingProgress& progress, const std::string& path) {
  onnx::ModelProto model = model_with_state(plan, state);
  auto set_meta = [&](const std::string& key, int64_t value) {
    for (auto& p : *model.mutable_metadata_props()) {
      if (p.key() == key) {
        p.set_value(std::to_string(value));
        return;
      }
    }
    auto* p = model.add_metadata_props();
    p->set_key(key);
    p->set_value(std::to_string(value));
  };
  set_meta(kStepKey, progress.step);
  set_meta(kPositionKey, progress.data_position);
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    throw Error("checkpoint '" + path +
                "': the model does not serialise (over protobuf's 2 GiB "
                "limit?)");
  }
  write_file_atomically(path, bytes);
}

Checkpoint read_checkpoint(const std::string& path) {
  onnx::ModelProto model;
  if (!model.ParseFromString(read_file(path))) throw Error("'" + path + "' is not an ONNX model");
  Checkpoint ckpt;
  for_each_initializer(model, [&](onnx::TensorProto& init) {
    ckpt.initializers[init.name()] =
        tensor_from_onnx(init, "checkpoint '" + path + "', initializer '" + init.name() + "'");
  });
  ckpt.progress.step = metadata_int(model, kStepKey, path);
  ckpt.progress.data_position = metadata_int(model, kPositionKey, path);
  return ckpt;
}

}  // namespace ampc::rt::io
