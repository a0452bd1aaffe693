// A complete text form of the IR: every node, attribute, type and a digest of all constant
// data. Two models print the same exactly when they are the same IR, which is what the
// round-trip tests compare; it is also the human-readable dump.
#pragma once

#include <string>

#include "ir/graph.h"

namespace ampc::ir {

std::string to_text(const Model& model);

}  // namespace ampc::ir
