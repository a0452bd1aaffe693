// Checkpoint loading: the bytes as a checkpoint file -> read_checkpoint (the ONNX model, every
// initializer as a tensor, the training progress in metadata_props).
#include "base/error.h"
#include "runtime/io/checkpoint.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/fuzz_util.h"

namespace ampc::fuzz {

int checkpoint_load(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("checkpoint.onnx", data, size);
  try {
    (void)rt::io::read_checkpoint(path);
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
