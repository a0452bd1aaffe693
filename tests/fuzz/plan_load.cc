// Plan loading: the bytes as a plan file (header, version, size, checksum, payload), and the
// bytes as the payload of a plan file with a correct header (so that the protobuf parse and
// what follows it are reached past the checksum).
#include <string>

#include "base/error.h"
#include "runtime/plan/plan_file.h"
#include "runtime/plan/plan_stats.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ampc::fuzz {

namespace {

void parse_and_count(const std::string& bytes) {
  try {
    const plan::Plan p = plan::parse_plan(bytes, "fuzz.plan");
    (void)plan::count_kernels(p);
  } catch (const ampc::Error&) {
  }
}

}  // namespace

int plan_load(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  parse_and_count(bytes);
  parse_and_count(plan::frame_plan_payload(bytes));
  return 0;
}

}  // namespace ampc::fuzz
