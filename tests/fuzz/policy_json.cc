// The --policy file: the bytes as the JSON file -> PrecisionPolicy (parse, keys, op names,
// conflicts between classes).
#include "base/error.h"
#include "passes/precision_policy.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/fuzz_util.h"

namespace ampc::fuzz {

int policy_json(const uint8_t* data, size_t size) {
  passes::AutocastOptions options;
  options.policy_file = write_scratch("policy.json", data, size);
  try {
    passes::PrecisionPolicy policy(options);
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
