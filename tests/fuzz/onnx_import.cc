// ONNX import: the bytes as a model file -> load_model (parse, checks, shape inference,
// conversion, the verifier inside) -> the verifier once more on the result, as compile does.
#include "base/error.h"
#include "frontend/onnx/import.h"
#include "ir/verifier.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/fuzz_util.h"

namespace ampc::fuzz {

int onnx_import(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("model.onnx", data, size);
  try {
    auto model = onnx_io::load_model(path);
    ir::verify(*model);
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
