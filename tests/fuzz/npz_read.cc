// .npz reading: the bytes as a zip file -> Dataset::open (libzip, every entry a .npy, shared
// first axis), then a split and one sample's copy, as the batcher reads them.
#include "base/error.h"
#include "runtime/data/dataset.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/fuzz_util.h"

namespace ampc::fuzz {

int npz_read(const uint8_t* data, size_t size) {
  const std::string path = write_scratch("data.npz", data, size);
  try {
    const auto set = rt::data::Dataset::open(path);
    const auto [head, tail] = rt::data::split(set, set.samples() / 2);
    (void)head;
    (void)tail;
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
