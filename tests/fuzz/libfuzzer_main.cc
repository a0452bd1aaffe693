// libFuzzer's entry point for one target: compiled once per fuzzer with AMPC_FUZZ_ENTRY set
// to that target's function (tests/fuzz/CMakeLists.txt).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return ampc::fuzz::AMPC_FUZZ_ENTRY(data, size);
}
