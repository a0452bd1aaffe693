// An IR model with no nodes yet: ONNX opset 17 imported, its graph named "g". The start of
// the tests that build their graph by hand.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace ampc::test {

inline std::unique_ptr<ir::Model> empty_model() {
  auto m = std::make_unique<ir::Model>();
  m->opsets.push_back({"", 17});
  m->graph->name = "g";
  return m;
}

}  // namespace ampc::test
