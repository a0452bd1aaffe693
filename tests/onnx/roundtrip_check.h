// Helpers shared by the round-trip tests: readable differences between two IR dumps, and a
// structural comparison of an original ONNX model with ampc's export of it (so that the
// round trip also proves the first import lost nothing: same nodes, attributes, names,
// initializer data, opsets).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace ampc::testing {

// "identical", or the first line where the two texts differ, both versions shown.
std::string first_difference(const std::string& a, const std::string& b);

// Empty when `exported` has the same structure as `original`: ir_version, opsets, graph
// inputs/outputs (names, in order), initializers (name, type, dims, data), and every node
// (name, op type, domain, inputs, outputs, attributes with their values, subgraphs
// recursively). Otherwise a description of the first difference. Value types and
// value_info are not compared here (the importer adds inferred types on purpose).
std::string structure_difference(const onnx::ModelProto& original,
                                 const onnx::ModelProto& exported);

}  // namespace ampc::testing
