#include "runtime/cuda/error_flags.h"

#include <cstring>

namespace ampc::rt::cuda {

int ErrorFlags::reserve(const std::string& step, const std::string& what) {
  flags_.emplace_back(step, what);
  return count() - 1;
}

int64_t ErrorFlags::bytes() const {
  if (flags_.empty()) return 0;
  return (offset(count()) + 255) / 256 * 256;
}

std::vector<std::string> ErrorFlags::set_in(const char* flags) const {
  std::vector<std::string> set;
  for (int k = 0; k < count(); ++k) {
    int32_t v = 0;
    std::memcpy(&v, flags + offset(k), sizeof v);
    if (v != 0)
      set.push_back(flags_[static_cast<size_t>(k)].first + ": " +
                    flags_[static_cast<size_t>(k)].second);
  }
  return set;
}

}  // namespace ampc::rt::cuda
