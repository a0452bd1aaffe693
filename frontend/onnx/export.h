// IR -> ONNX. The result passes ONNX's full check (check_model below) and imports back to
// an identical IR.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace ampc::onnx_io {

onnx::ModelProto export_model(const ir::Model& model);

// Writes the model to `path` (through a temporary file, so a failure leaves nothing behind).
void save_model(const ir::Model& model, const std::string& path);

std::string serialize_model(const onnx::ModelProto& proto);

// ONNX's checker with the full check: the structural checker, then strict shape and type
// inference (what onnx.checker.check_model(m, full_check=True) does in Python).
// A model with training_info is checked as ONNX allows it (check_training_info) and its
// combined training graph (main graph + algorithm) must pass the same full check.
void check_model(const onnx::ModelProto& proto);

// Pieces of export_model that export_training_model (export_training.h) shares.
void export_model_header(const ir::Model& model, onnx::ModelProto* proto);  // all but the graph
void export_graph(const ir::Graph& g, onnx::GraphProto* out);
void export_node(const ir::Node& n, onnx::NodeProto* out);
void value_info(const ir::Value& v, onnx::ValueInfoProto* out);
// Whether `v` belongs in a graph's value_info: a typed value that is neither a graph input,
// an initializer nor one of `outputs`.
bool is_intermediate(const ir::Value& v, const std::vector<ir::Value*>& outputs);

}  // namespace ampc::onnx_io
