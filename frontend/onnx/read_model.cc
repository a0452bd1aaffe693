#include "frontend/onnx/read_model.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "base/file_util.h"

namespace ampc::onnx_io {
namespace fs = std::filesystem;

onnx::ModelProto read_model_proto(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.empty()) throw Error("'" + path + "' is empty, not an ONNX model");

  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) {
    throw Error("'" + path +
                "' is not a valid ONNX model (protobuf parse failed: truncated or not ONNX)");
  }
  // Protobuf accepts many byte strings that are not models (and files cut at a field
  // boundary); a model always names its IR version, an opset and a graph.
  if (proto.ir_version() <= 0 || proto.opset_import_size() == 0 || !proto.has_graph()) {
    throw Error("'" + path +
                "' is not a valid ONNX model (missing ir_version, opset_import or graph)");
  }
  return proto;
}

namespace {

// The file an external-data location names, refused if it is absolute or escapes model_dir.
fs::path checked_location(const std::string& tensor, const std::string& location,
                          const fs::path& model_dir) {
  const fs::path loc(location);
  if (location.empty()) throw Error("initializer '" + tensor + "': external data has no location");
  if (loc.is_absolute()) {
    throw Error("initializer '" + tensor + "': external data location '" + location +
                "' is absolute; it must be relative to the model's folder");
  }
  for (const auto& part : loc) {
    if (part == "..") {
      throw Error("initializer '" + tensor + "': external data location '" + location +
                  "' leaves the model's folder");
    }
  }
  // Also catch a symbolic link inside the folder that points out of it.
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(model_dir, ec);
  const fs::path full = fs::weakly_canonical(model_dir / loc, ec);
  auto rel = full.lexically_relative(base);
  if (rel.empty() || *rel.begin() == "..") {
    throw Error("initializer '" + tensor + "': external data location '" + location +
                "' resolves outside the model's folder");
  }
  return full;
}

// A non-negative decimal number, the whole field; an error naming the field otherwise.
long long external_number(const onnx::TensorProto& t, const std::string& key,
                          const std::string& value) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
  }
  if (value.empty() || used != value.size() || v < 0) {
    throw Error("initializer '" + t.name() + "': bad external data field '" + key + "' ('" + value +
                "': expected a number of bytes)");
  }
  return v;
}

void load_external(onnx::TensorProto& t, const fs::path& model_dir) {
  std::string location;
  long long offset = 0;
  std::optional<long long> length;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = external_number(t, kv.key(), kv.value());
    if (kv.key() == "length") length = external_number(t, kv.key(), kv.value());
  }
  // A NUL byte would cut the name short when the file is opened: another file than named.
  if (location.find('\0') != std::string::npos) {
    throw Error("initializer '" + t.name() + "': external data location contains a NUL byte");
  }
  const fs::path file = checked_location(t.name(), location, model_dir);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw Error("initializer '" + t.name() + "': cannot open external data '" + location +
                (fs::exists(file, ec) ? "': not a regular file" : "': no such file"));
  }
  const auto size = static_cast<long long>(fs::file_size(file, ec));
  if (ec)
    throw Error("initializer '" + t.name() + "': cannot read external data '" + location + "'");
  // Compared without forming offset + length, which may overflow.
  if (offset > size || (length && *length > size - offset)) {
    throw Error("initializer '" + t.name() + "': external data '" + location +
                "' is shorter than offset + length");
  }
  const long long bytes = length ? *length : size - offset;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw Error("initializer '" + t.name() + "': cannot open external data '" + location + "'");
  std::string data(static_cast<size_t>(bytes), '\0');
  in.seekg(offset);
  in.read(data.data(), bytes);
  if (in.gcount() != bytes) {
    throw Error("initializer '" + t.name() + "': external data '" + location +
                "' could not be read in full");
  }
  t.set_raw_data(std::move(data));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

}  // namespace

void resolve_external_data(onnx::ModelProto& proto, const std::string& model_dir) {
  for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) load_external(t, model_dir);
  }
}

}  // namespace ampc::onnx_io
