// External-data resolution. The input is the initializer's external_data as text, one
// "key=value" per line (location, offset, length, checksum, anything), optionally a line
// "type=N" for data_type and "dims=AxB"; the model's folder holds data.bin (64 bytes),
// sub/data.bin (16 bytes) and a file outside it. resolve_external_data must load what lies
// inside the folder and refuse everything else with an ampc::Error.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "frontend/onnx/read_model.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/fuzz_util.h"

namespace ampc::fuzz {

namespace {

// scratch/model/{data.bin, sub/data.bin} and scratch/outside.bin.
const std::string& model_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const fs::path root = scratch_dir();
    fs::create_directories(root / "model" / "sub");
    std::ofstream(root / "model" / "data.bin", std::ios::binary) << std::string(64, '\x3f');
    std::ofstream(root / "model" / "sub" / "data.bin", std::ios::binary) << std::string(16, 'a');
    std::ofstream(root / "outside.bin", std::ios::binary) << std::string(32, 'o');
    return (root / "model").string();
  }();
  return dir;
}

}  // namespace

int external_data(const uint8_t* data, size_t size) {
  onnx::ModelProto model;
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "type") {
      t->set_data_type(static_cast<int>(static_cast<unsigned char>(value.empty() ? 0 : value[0])));
    } else if (key == "dims") {
      std::istringstream dims(value);
      long long d;
      char x;
      while (dims >> d) {
        t->add_dims(d);
        dims >> x;
      }
    } else {
      auto* kv = t->add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
  }
  try {
    onnx_io::resolve_external_data(model, model_dir());
  } catch (const ampc::Error&) {
  }
  return 0;
}

}  // namespace ampc::fuzz
