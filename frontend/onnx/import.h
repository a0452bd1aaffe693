// ONNX -> IR. `load_model` reads a file (resolving external data inside the model's folder),
// fixes input shapes, runs ONNX shape inference and converts; `import_model` converts a
// ModelProto already in memory. Every failure is an ampc::Error naming what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnx {
class ModelProto;
}

namespace ampc::onnx_io {

struct ImportOptions {
  // --input-shape NAME=D0xD1x...: fixes (or overrides) the shape of a graph input.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Graph inputs must end up fully static; the compiler always wants this. Round-trip tools
  // that only look at a graph may relax it.
  bool require_static_inputs = true;
  // ONNX's training format (training_info): when true, the combined training graph (main
  // graph then algorithm) is imported and update_binding becomes Model::state_updates; when
  // false, only the main graph (inference) is imported and training_info is ignored.
  bool training = false;
};

std::unique_ptr<ir::Model> load_model(const std::string& path, const ImportOptions& options = {});

// `proto` is modified (shape overrides, inferred value_info). External data must already be
// resolved.
std::unique_ptr<ir::Model> import_model(onnx::ModelProto& proto, const ImportOptions& options = {});

// Parses "NAME=D0xD1x..." ("NAME=" for a scalar) into options.input_shapes.
void parse_input_shape(const std::string& spec, ImportOptions& options);

}  // namespace ampc::onnx_io
