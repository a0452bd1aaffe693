// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) <-> runtime tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"

namespace ampc::rt::io {

// What a .npy header says about the array that follows it.
struct NpyHeader {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // bytes from the start of the file to the first element
  size_t data_bytes = 0;   // element count times element size
};

// Parses the header of a whole .npy file held in `bytes` (read or memory-mapped) and checks
// that the data after it has exactly the size the header describes; copies nothing. `what`
// names the file (and array) in error messages.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& what);

Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);

Tensor read_npy(const std::string& path);
void write_npy(const Tensor& t, const std::string& path);

}  // namespace ampc::rt::io
