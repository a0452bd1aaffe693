// .npy reading: the bytes as a whole file -> parse_npy (header, dtype, shape, data size).
#include <string>

#include "base/error.h"
#include "runtime/io/npy.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ampc::fuzz {

int npy_read(const uint8_t* data, size_t size) {
  try {
    (void)rt::io::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
