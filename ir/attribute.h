// Node attributes, one struct for every ONNX attribute kind the IR keeps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace ampc::ir {

class Graph;

enum class AttrKind {
  kFloat,
  kInt,
  kString,
  kTensor,
  kGraph,
  kFloats,
  kInts,
  kStrings,
  kTensors,
  kGraphs
};

struct Attribute {
  std::string name;
  AttrKind kind = AttrKind::kInt;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::unique_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  std::string doc_string;

  static Attribute make_int(std::string name, int64_t v);
  static Attribute make_float(std::string name, float v);
  static Attribute make_string(std::string name, std::string v);
  static Attribute make_ints(std::string name, std::vector<int64_t> v);
  static Attribute make_floats(std::string name, std::vector<float> v);
  static Attribute make_tensor(std::string name, Tensor v);
};

std::string_view attr_kind_name(AttrKind k);

}  // namespace ampc::ir
