#include "python/src/tensor_view.h"

#include <cstring>

#include "base/error.h"
#include "base/half.h"

namespace ampc::python {

namespace py = pybind11;

std::string type_str(DType dtype, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dtype)) + rt::shape_str(shape);
}

DType dtype_of_buffer(const py::buffer_info& info) {
  std::string f = info.format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
  if (f.size() != 1) return DType::kUndefined;
  const auto size = info.itemsize;
  switch (f[0]) {
    case 'f':
      return DType::kFloat32;
    case 'd':
      return DType::kFloat64;
    case 'e':
      return DType::kFloat16;
    case '?':
      return DType::kBool;
    case 'b':
      return DType::kInt8;
    case 'B':
      return DType::kUInt8;
    case 'h':
      return DType::kInt16;
    case 'H':
      return DType::kUInt16;
    case 'i':
      return DType::kInt32;
    case 'I':
      return DType::kUInt32;
    case 'l':
    case 'q':
      return size == 8 ? DType::kInt64 : DType::kInt32;
    case 'L':
    case 'Q':
      return size == 8 ? DType::kUInt64 : DType::kUInt32;
    default:
      return DType::kUndefined;
  }
}

BorrowedArray borrow(const py::buffer_info& info, const std::string& name) {
  BorrowedArray a;
  a.dtype = dtype_of_buffer(info);
  a.shape.assign(info.shape.begin(), info.shape.end());
  if (a.dtype == DType::kUndefined)
    throw Error("input '" + name + "': element format '" + info.format +
                "' is not one ampc computes with");
  // C order: each stride is the product of the later extents (any stride of an extent-1
  // axis is fine).
  py::ssize_t expected = info.itemsize;
  for (auto i = info.ndim; i-- > 0;) {
    if (info.shape[i] != 1 && info.strides[i] != expected)
      throw Error("input '" + name + "' is not C-contiguous");
    expected *= info.shape[i];
  }
  a.data = static_cast<const uint8_t*>(info.ptr);
  return a;
}

py::array to_numpy(const rt::Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (t.dtype() == DType::kBFloat16) {
    py::array_t<float> out(shape);
    const auto* in = t.data<BFloat16>();
    float* o = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = bf16_to_float(in[i]);
    return out;
  }
  const char* format = nullptr;
  switch (t.dtype()) {
    case DType::kFloat32:
      format = "f";
      break;
    case DType::kFloat64:
      format = "d";
      break;
    case DType::kFloat16:
      format = "e";
      break;
    case DType::kBool:
      format = "?";
      break;
    case DType::kInt8:
      format = "b";
      break;
    case DType::kUInt8:
      format = "B";
      break;
    case DType::kInt16:
      format = "h";
      break;
    case DType::kUInt16:
      format = "H";
      break;
    case DType::kInt32:
      format = "i";
      break;
    case DType::kUInt32:
      format = "I";
      break;
    case DType::kInt64:
      format = "q";
      break;
    case DType::kUInt64:
      format = "Q";
      break;
    default:
      throw Error("a " + t.type_str() + " tensor has no numpy equivalent");
  }
  // Without a base object, pybind11 copies the bytes into the new array.
  return py::array(py::dtype(format), shape, t.raw());
}

rt::Tensor to_tensor(const BorrowedArray& a) {
  rt::Tensor t(a.dtype, a.shape);
  if (t.nbytes() > 0) std::memcpy(t.raw(), a.data, t.nbytes());
  return t;
}

rt::Tensor tensor_over(const BorrowedArray& a) {
  // Tensor::borrowed takes a mutable pointer for the tensors that may be written; the
  // executor only reads input buffers (runtime/cpu/executor.cc).
  return rt::Tensor::borrowed(a.dtype, a.shape, const_cast<uint8_t*>(a.data));
}

rt::data::Dataset dataset_of(const std::map<std::string, BorrowedArray>& arrays) {
  std::map<std::string, rt::data::Array> out;
  for (const auto& [name, a] : arrays) {
    rt::data::Array& d = out[name];
    d.dtype = a.dtype;
    d.shape = a.shape;
    d.data = a.data;
  }
  return rt::data::Dataset::from_arrays("the arrays given", std::move(out));
}

}  // namespace ampc::python
