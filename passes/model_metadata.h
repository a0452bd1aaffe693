// ONNX metadata entries that ampc's exporter writes as one name per line (ampc.untrained,
// ampc.stop_gradient, ampc.buffer_updates, ampc.autocast_disabled), read back.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

// The lines of one metadata value, empty ones left out.
std::vector<std::string> value_lines(const std::string& value);

// The lines of the model's metadata under `key` (every entry with that key), empty ones
// left out.
std::vector<std::string> metadata_lines(const ir::Model& model, const std::string& key);

}  // namespace ampc::passes
