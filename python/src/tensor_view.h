// Python buffers (numpy arrays, the buffer protocol) <-> the runtime's tensors.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "runtime/data/dataset.h"
#include "runtime/tensor.h"

namespace ampc::python {

// A caller's array as the trainer reads it: its bytes where they are (no copy).
struct BorrowedArray {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
};

// "f32[32,64]"; an unknown element type shows as "?[...]" with the buffer's format.
std::string type_str(DType dtype, const std::vector<int64_t>& shape);

// The element type of a buffer's struct format ("f", "<d", "q", "e", "?", ...), kUndefined
// for formats the runtime has no type for (big-endian, structs, complex...).
DType dtype_of_buffer(const pybind11::buffer_info& info);

// `info` borrowed as an array; throws ampc::Error naming `name` when it is not C-contiguous
// (the Python layer makes such arrays contiguous first) or its element type is not one of
// the runtime's.
BorrowedArray borrow(const pybind11::buffer_info& info, const std::string& name);

// A numpy array holding a copy of `t` (bf16 as float32: numpy has no bfloat16).
pybind11::array to_numpy(const rt::Tensor& t);

// A tensor holding a copy of `a` (for state, which the steps update in place).
rt::Tensor to_tensor(const BorrowedArray& a);

// A tensor over `a`'s memory, no copy: the runtime reads a step's inputs where they lie and
// never writes them. `a` must outlive the tensor.
rt::Tensor tensor_over(const BorrowedArray& a);

// A data set over borrowed arrays (they must outlive it).
rt::data::Dataset dataset_of(const std::map<std::string, BorrowedArray>& arrays);

}  // namespace ampc::python
