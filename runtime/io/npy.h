// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) <-> runtime tensors.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace ampc::rt::io {

Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);

Tensor read_npy(const std::string& path);
void write_npy(const Tensor& t, const std::string& path);

}  // namespace ampc::rt::io
