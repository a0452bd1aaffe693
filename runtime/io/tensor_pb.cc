#include "runtime/io/tensor_pb.h"

#include <cstring>

#include "base/error.h"
#include "base/file_util.h"
#include "runtime/io/tensor_proto_fields.h"

namespace ampc::rt::io {
namespace {

template <typename Dst, typename Src>
void copy_field(const Src& field, Tensor& t) {
  if (static_cast<int64_t>(field.size()) != t.numel()) {
    throw Error("tensor data has " + std::to_string(field.size()) + " values for " + t.type_str());
  }
  auto* out = static_cast<uint8_t*>(t.raw());
  for (const auto& v : field) {
    const Dst d = static_cast<Dst>(v);
    std::memcpy(out, &d, sizeof(Dst));
    out += sizeof(Dst);
  }
}

}  // namespace

Tensor tensor_from_onnx(const onnx::TensorProto& p, const std::string& what) {
  if (!dtype_is_known(p.data_type()))
    throw Error(what + ": unknown element type " + std::to_string(p.data_type()));
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    throw Error(what + ": external data is not supported here");
  Tensor t(static_cast<DType>(p.data_type()), {p.dims().begin(), p.dims().end()});
  try {
    if (t.dtype() == DType::kString) {
      if (p.string_data_size() != t.numel()) throw Error("wrong number of strings");
      for (int i = 0; i < p.string_data_size(); ++i) t.strings()[i] = p.string_data(i);
    } else if (p.has_raw_data()) {
      if (p.raw_data().size() != t.nbytes()) {
        throw Error("raw data has " + std::to_string(p.raw_data().size()) + " bytes for " +
                    t.type_str());
      }
      // An empty tensor's storage may be null, which memcpy must not be given.
      if (t.nbytes() > 0) std::memcpy(t.raw(), p.raw_data().data(), t.nbytes());
    } else {
      auto copy = [&]<typename Dst>(const auto& field) { copy_field<Dst>(field, t); };
      // Complex tensors have typed fields too, but the runtime does not compute with them.
      const bool complex = t.dtype() == DType::kComplex64 || t.dtype() == DType::kComplex128;
      if (complex || !visit_typed_field(p, t.dtype(), copy))
        throw Error("element type " + std::string(dtype_name(t.dtype())) + " is not supported");
    }
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  return t;
}

onnx::TensorProto tensor_to_onnx(const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p.add_dims(d);
  if (t.dtype() == DType::kString) {
    for (const auto& s : t.strings()) p.add_string_data(s);
  } else {
    p.set_raw_data(t.raw(), t.nbytes());
  }
  return p;
}

Tensor read_tensor_pb(const std::string& path, std::string* name) {
  onnx::TensorProto p;
  if (!p.ParseFromString(read_file(path)))
    throw Error("'" + path + "' is not an ONNX TensorProto file");
  if (name) *name = p.name();
  return tensor_from_onnx(p, "'" + path + "'");
}

void write_tensor_pb(const Tensor& t, const std::string& name, const std::string& path) {
  std::string bytes;
  tensor_to_onnx(t, name).SerializeToString(&bytes);
  write_file_atomically(path, bytes);
}

}  // namespace ampc::rt::io
