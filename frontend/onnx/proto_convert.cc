#include "frontend/onnx/proto_convert.h"

#include <cstring>

#include "base/checked_size.h"
#include "base/error.h"
#include "runtime/io/tensor_proto_fields.h"

namespace ampc::onnx_io {
namespace {

// Appends the typed-field values of `t` (its dtype's field as onnx.proto lays it out), each
// as the C++ type its dtype stores.
void typed_data(const onnx::TensorProto& t, DType dtype, std::vector<uint8_t>& bytes) {
  rt::io::visit_typed_field(t, dtype, [&]<typename Dst>(const auto& values) {
    const size_t start = bytes.size();
    bytes.resize(start + values.size() * sizeof(Dst));
    auto* out = bytes.data() + start;
    for (const auto& v : values) {
      const Dst d = static_cast<Dst>(v);
      std::memcpy(out, &d, sizeof(Dst));
      out += sizeof(Dst);
    }
  });
}

}  // namespace

ir::Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& what) {
  ir::Tensor out;
  out.name = t.name();
  out.doc_string = t.doc_string();
  if (!dtype_is_known(t.data_type())) {
    throw Error(what + ": unknown tensor element type " + std::to_string(t.data_type()));
  }
  out.dtype = static_cast<DType>(t.data_type());
  out.dims.assign(t.dims().begin(), t.dims().end());
  for (int64_t d : out.dims) {
    if (d < 0) throw Error(what + ": negative dimension in tensor data");
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    throw Error(what + ": external data was not resolved");
  }
  if (t.has_segment()) throw Error(what + ": segmented tensors are not supported");
  if (out.dtype == DType::kString) {
    out.strings.assign(t.string_data().begin(), t.string_data().end());
    if (static_cast<int64_t>(out.strings.size()) != out.numel()) {
      throw Error(what + ": has " + std::to_string(out.strings.size()) + " strings for " +
                  std::to_string(out.numel()) + " elements");
    }
    return out;
  }
  if (t.has_raw_data()) {
    out.bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    typed_data(t, out.dtype, out.bytes);
  }
  const auto expected =
      static_cast<size_t>(checked_tensor_bytes(out.dims, dtype_size(out.dtype), what));
  if (out.bytes.size() != expected) {
    throw Error(what + ": data has " + std::to_string(out.bytes.size()) + " bytes, its type " +
                std::string(dtype_name(out.dtype)) + " and shape need " + std::to_string(expected));
  }
  return out;
}

void tensor_to_proto(const ir::Tensor& t, onnx::TensorProto* out) {
  out->Clear();
  if (!t.name.empty()) out->set_name(t.name);
  if (!t.doc_string.empty()) out->set_doc_string(t.doc_string);
  out->set_data_type(static_cast<int32_t>(t.dtype));
  for (int64_t d : t.dims) out->add_dims(d);
  if (t.dtype == DType::kString) {
    for (const auto& s : t.strings) out->add_string_data(s);
  } else {
    out->set_raw_data(t.bytes.data(), t.bytes.size());
  }
}

ir::TensorType type_from_proto(const onnx::TypeProto& t, const std::string& value_name) {
  const char* kind = nullptr;
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      break;
    case onnx::TypeProto::kSequenceType:
      kind = "sequence";
      break;
    case onnx::TypeProto::kMapType:
      kind = "map";
      break;
    case onnx::TypeProto::kOptionalType:
      kind = "optional";
      break;
    case onnx::TypeProto::kSparseTensorType:
      kind = "sparse tensor";
      break;
    case onnx::TypeProto::VALUE_NOT_SET:
      return {};
    default:
      kind = "non-tensor";
      break;
  }
  if (kind) {
    throw Error("value '" + value_name + "' has " + kind +
                " type; ampc supports dense tensor values only");
  }
  ir::TensorType out;
  const auto& tt = t.tensor_type();
  if (tt.elem_type() != 0) {
    if (!dtype_is_known(tt.elem_type())) {
      throw Error("value '" + value_name + "' has unknown element type " +
                  std::to_string(tt.elem_type()));
    }
    out.dtype = static_cast<DType>(tt.elem_type());
  }
  if (tt.has_shape()) {
    std::vector<int64_t> dims;
    for (const auto& d : tt.shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    out.shape = std::move(dims);
  }
  return out;
}

void type_to_proto(const ir::TensorType& t, onnx::TypeProto* out) {
  auto* tt = out->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (!t.shape) return;
  auto* shape = tt->mutable_shape();
  for (int64_t d : *t.shape) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}

}  // namespace ampc::onnx_io
