#include "base/checked_size.h"

#include "base/error.h"

namespace ampc {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

int64_t checked_tensor_bytes(const std::vector<int64_t>& shape, size_t element_bytes,
                             const std::string& what) {
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + ": shape " + shape_text(shape) + " has a negative dimension");
  }
  const auto n = checked_numel(shape);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(element_bytes), &bytes) ||
      bytes > kMaxTensorBytes) {
    // A count that does not even fit 64 bits is said as such; one that does, with its bytes.
    const std::string count =
        n ? std::to_string(*n) + " elements of " + std::to_string(element_bytes) + " bytes"
          : "more than 2^63 elements";
    throw Error(what + ": shape " + shape_text(shape) + " has " + count +
                ", more than the 256 TiB (2^48 bytes) a process can address");
  }
  return bytes;
}

int64_t checked_add_bytes(int64_t a, int64_t b, const std::string& what) {
  constexpr int64_t kLimit = kMaxTensorBytes << 8;
  int64_t sum = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &sum) || sum > kLimit) {
    throw Error(what + ": more than 2^56 bytes in total, more than a process can address");
  }
  return sum;
}

}  // namespace ampc
