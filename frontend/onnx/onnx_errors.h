// libonnx's checker and shape inference throw messages of several lines (the node, the
// schema, the context); ampc reports the first.
#pragma once

#include <exception>
#include <string>

#include "base/error.h"

namespace ampc::onnx_io {

// Runs `f`; whatever it throws becomes an ampc::Error of `prefix` and the first line of its
// message.
template <typename F>
void with_first_line_errors(const std::string& prefix, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    throw Error(prefix + msg);
  }
}

}  // namespace ampc::onnx_io
