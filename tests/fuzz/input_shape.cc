// The --input-shape parser: the bytes as one spec "NAME=D0xD1x..." (every line another spec
// of the same command line) -> parse_input_shape.
#include <sstream>
#include <string>

#include "base/error.h"
#include "frontend/onnx/import.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ampc::fuzz {

int input_shape(const uint8_t* data, size_t size) {
  std::istringstream specs(std::string(reinterpret_cast<const char*>(data), size));
  onnx_io::ImportOptions options;
  std::string spec;
  while (std::getline(specs, spec)) {
    try {
      onnx_io::parse_input_shape(spec, options);
    } catch (const ampc::Error&) {
    }
  }
  return 0;
}

}  // namespace ampc::fuzz
