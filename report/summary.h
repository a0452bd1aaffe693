// What `ampc inspect MODEL.onnx` reports about a model: inputs, outputs, initializers, the
// op histogram and opsets, as text for people and as JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/graph.h"

namespace ampc::report {

// Keys: inputs, outputs (name, dtype, shape), initializers {count, bytes}, ops {type: count},
// opsets {domain: version}, nodes, subgraphs, ir_version, producer.
nlohmann::ordered_json model_summary_json(const ir::Model& model);
std::string model_summary_text(const ir::Model& model, const std::string& title);

}  // namespace ampc::report
