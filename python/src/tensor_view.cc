#include "python/src/tensor_view.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "base/error.h"
#include "base/half.h"

namespace ampc::python {

namespace py = pybind11;

std::string type_str(DType dtype, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dtype)) + rt::shape_str(shape);
}

namespace {

// Each element type numpy holds and its buffer-protocol format character (bfloat16 has none).
// 'q'/'Q' name 64-bit integers here; in a buffer they, like 'l'/'L', go by their item size.
constexpr std::pair<DType, char> kFormats[] = {
    {DType::kFloat32, 'f'}, {DType::kFloat64, 'd'}, {DType::kFloat16, 'e'}, {DType::kBool, '?'},
    {DType::kInt8, 'b'},    {DType::kUInt8, 'B'},   {DType::kInt16, 'h'},   {DType::kUInt16, 'H'},
    {DType::kInt32, 'i'},   {DType::kUInt32, 'I'},  {DType::kInt64, 'q'},   {DType::kUInt64, 'Q'}};

}  // namespace

DType dtype_of_buffer(const py::buffer_info& info) {
  std::string f = info.format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
  if (f.size() != 1) return DType::kUndefined;
  const bool eight_bytes = info.itemsize == 8;
  if (f[0] == 'l' || f[0] == 'q') return eight_bytes ? DType::kInt64 : DType::kInt32;
  if (f[0] == 'L' || f[0] == 'Q') return eight_bytes ? DType::kUInt64 : DType::kUInt32;
  for (const auto& [dtype, c] : kFormats) {
    if (c == f[0]) return dtype;
  }
  return DType::kUndefined;
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
  const auto* entry = std::find_if(std::begin(kFormats), std::end(kFormats),
                                   [&](const auto& e) { return e.first == t.dtype(); });
  if (entry == std::end(kFormats))
    throw Error("a " + t.type_str() + " tensor has no numpy equivalent");
  const std::string format(1, entry->second);
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
