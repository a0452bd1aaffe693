// Element counts and byte sizes of tensors, computed with overflow checks. A shape read from
// a file or written by the user ([2^40, 2^40]) must be refused with a message, never
// multiplied into a wrapped-around size (an arena of 0 B, a buffer shorter than its data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ampc {

// The most bytes one tensor may take: 2^48 (256 TiB), the virtual address space a 64-bit
// x86 or ARM process has. Sizes up to it times any element size stay far below 2^63.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;

// The product of the dimensions, or nothing when one is negative or the product overflows
// int64.
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape);

// numel(shape) * element_bytes, checked: throws ampc::Error "<what>: shape [..] has N
// elements of B bytes, more than the 256 TiB a process can address" (or that it overflows)
// when it does not fit kMaxTensorBytes, or names a negative dimension.
int64_t checked_tensor_bytes(const std::vector<int64_t>& shape, size_t element_bytes,
                             const std::string& what);

// a + b for sizes in bytes, throwing ampc::Error naming `what` past kMaxTensorBytes * 2^8
// (the total of many tensors; past it the sum would not be addressable either).
int64_t checked_add_bytes(int64_t a, int64_t b, const std::string& what);

}  // namespace ampc
