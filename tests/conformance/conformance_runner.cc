#include "tests/conformance/conformance_runner.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "base/error.h"
#include "driver/pipeline.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/read_model.h"
#include "runtime/cpu/executor.h"
#include "runtime/io/tensor_pb.h"

namespace ampc::conformance {
namespace fs = std::filesystem;
namespace {

// Ops whose outputs are random: ONNX's expected values cannot be reproduced bit for bit.
const std::set<std::string> kRandomOps = {"Bernoulli",    "RandomUniform",    "RandomUniformLike",
                                          "RandomNormal", "RandomNormalLike", "Multinomial"};

// Cases whose expected data contradicts a rule ampc follows on purpose.
const std::map<std::string, std::string> kKnownDeviations = {
    {"test_cast_FLOAT_to_BFLOAT16",
     "ONNX 1.12's expected data truncates float to bfloat16; ampc rounds to nearest even, as "
     "PyTorch and CUDA do"},
};

// ONNX 1.12's test_adam_multiple computes its expected outputs with epsilon 1e-2 but its
// Adam node does not carry that attribute, so a correct kernel uses the default 1e-6 and
// misses them (onnx/onnx issue 7749). Repaired as ONNX itself later repaired the model.
void repair_model(const std::string& name, onnx::ModelProto& proto) {
  if (name != "test_adam_multiple") return;
  for (auto& n : *proto.mutable_graph()->mutable_node()) {
    bool has_epsilon = false;
    for (const auto& a : n.attribute()) has_epsilon |= a.name() == "epsilon";
    if (n.op_type() != "Adam" || has_epsilon) continue;
    auto* a = n.add_attribute();
    a->set_name("epsilon");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(1e-2f);
  }
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  }
  // input_10.pb sorts after input_9.pb.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    auto num = [](const fs::path& p) {
      return std::stoi(std::regex_replace(p.stem().string(), std::regex("[^0-9]"), ""));
    };
    return num(a) < num(b);
  });
  return files;
}

template <typename T>
double value_at(const rt::Tensor& t, int64_t i) {
  return static_cast<double>(t.data<T>()[i]);
}

double as_double(const rt::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return value_at<float>(t, i);
    case DType::kFloat64:
      return value_at<double>(t, i);
    case DType::kFloat16:
      return half_to_float(t.data<Half>()[i]);
    case DType::kBFloat16:
      return bf16_to_float(t.data<BFloat16>()[i]);
    case DType::kInt64:
      return value_at<int64_t>(t, i);
    case DType::kInt32:
      return value_at<int32_t>(t, i);
    case DType::kInt16:
      return value_at<int16_t>(t, i);
    case DType::kInt8:
      return value_at<int8_t>(t, i);
    case DType::kUInt64:
      return value_at<uint64_t>(t, i);
    case DType::kUInt32:
      return value_at<uint32_t>(t, i);
    case DType::kUInt16:
      return value_at<uint16_t>(t, i);
    case DType::kUInt8:
      return value_at<uint8_t>(t, i);
    case DType::kBool:
      return value_at<bool>(t, i);
    default:
      throw Error("cannot compare element type " + std::string(dtype_name(t.dtype())));
  }
}

// Empty when equal within tolerance, else a description of the first mismatch.
std::string compare(const rt::Tensor& got, const rt::Tensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return "got " + got.type_str() + ", expected " + want.type_str();
  }
  if (want.dtype() == DType::kString)
    return got.strings() == want.strings() ? "" : "strings differ";
  // Integer results must match exactly (int64 beyond 2^53 compared through double is close enough
  // here).
  const bool exact = !is_float(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = as_double(got, i);
    const double w = as_double(want, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    const bool ok = exact ? g == w : std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
    if (!ok) {
      std::ostringstream os;
      os << "element " << i << ": got " << g << ", expected " << w;
      return os.str();
    }
  }
  return "";
}

// ONNX 1.12's test data stores bfloat16 tensors as uint16 (test_cast_*BFLOAT16*): the bits
// are the bfloat16 bits, so read them as the model's declared type.
rt::Tensor bf16_quirk(rt::Tensor t, DType declared) {
  if (t.dtype() != DType::kUInt16 || declared != DType::kBFloat16) return t;
  rt::Tensor out(DType::kBFloat16, t.shape());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

rt::Tensor read_input(const std::string& path, const onnx::ModelProto& proto,
                      const std::string& name) {
  for (const auto& in : proto.graph().input()) {
    if (in.name() == name)
      return bf16_quirk(rt::io::read_tensor_pb(path),
                        static_cast<DType>(in.type().tensor_type().elem_type()));
  }
  return rt::io::read_tensor_pb(path);
}

// Resize's roi, scales and sizes are fed as graph inputs by ONNX's test models, where a real
// model has them as constants (torch exports them so), and ampc lowers Resize at compile time
// from their values (passes/lower_resize.h). When every data set feeds the same bytes, they
// become initializers of the model; returns their names.
std::set<std::string> bind_resize_parameters(onnx::ModelProto& proto,
                                             const std::vector<fs::path>& data_sets,
                                             const std::vector<std::string>& input_names) {
  std::set<std::string> wanted;
  for (const auto& n : proto.graph().node()) {
    if (n.op_type() != "Resize") continue;
    for (int k = 1; k < n.input_size(); ++k) wanted.insert(n.input(k));
  }
  std::set<std::string> bound;
  for (size_t i = 0; i < input_names.size(); ++i) {
    if (!wanted.count(input_names[i])) continue;
    std::string bytes;
    bool same = true;
    for (const auto& set : data_sets) {
      const auto files = sorted_files(set, "input_");
      if (i >= files.size()) return bound;
      std::ifstream f(files[i], std::ios::binary);
      const std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      same = same && (bytes.empty() || b == bytes);
      bytes = b;
    }
    onnx::TensorProto t;
    if (!same || !t.ParseFromString(bytes)) continue;
    t.set_name(input_names[i]);
    *proto.mutable_graph()->add_initializer() = t;
    bound.insert(input_names[i]);
  }
  auto* inputs = proto.mutable_graph()->mutable_input();
  for (int k = inputs->size() - 1; k >= 0; --k) {
    if (bound.count(inputs->Get(k).name())) inputs->DeleteSubrange(k, 1);
  }
  return bound;
}

CaseResult unsupported(const std::string& message, const std::string& what) {
  return {Outcome::kUnsupported, message, what};
}

// The unsupported op named in a message like "node 'x' (Foo): ..." or "... operator 'Foo'".
std::string op_in_message(const std::string& message) {
  for (const char* kind :
       {"has sequence type", "has optional type", "has map type", "has sparse"}) {
    if (message.find(kind) != std::string::npos) return "non-tensor types";
  }
  if (message.find("--input-shape") != std::string::npos) {
    return "test data input has another rank than the model declares";
  }
  std::smatch m;
  if (std::regex_search(message, m, std::regex(R"(\((?:[\w.]+\.)?(\w+)\))"))) return m[1];
  return message.substr(0, 60);
}

CaseResult run_case_unguarded(const std::string& case_dir, const Tolerance& tol) {
  const fs::path dir(case_dir);
  std::vector<fs::path> data_sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      data_sets.push_back(e.path());
  }
  std::sort(data_sets.begin(), data_sets.end());
  if (data_sets.empty()) return unsupported("no test data", "no test data");
  if (auto it = kKnownDeviations.find(dir.filename().string()); it != kKnownDeviations.end()) {
    return unsupported(it->second, "deliberate deviation: " + it->second);
  }

  onnx::ModelProto proto;
  std::unique_ptr<rt::cpu::Executor> executor;
  std::vector<std::string> input_names;
  std::set<std::string> bound;  // inputs made initializers (bind_resize_parameters)
  try {
    proto = onnx_io::read_model_proto((dir / "model.onnx").string());
    repair_model(dir.filename().string(), proto);
    for (const auto& n : proto.graph().node()) {
      if (kRandomOps.count(n.op_type()) ||
          (n.op_type() == "Dropout" && n.input_size() >= 3 && !n.input(2).empty())) {
        return unsupported("random outputs cannot match the expected data",
                           "random: " + n.op_type());
      }
    }
    // The graph inputs that data sets feed: those without an initializer, in order.
    std::set<std::string> inits;
    for (const auto& t : proto.graph().initializer()) inits.insert(t.name());
    for (const auto& in : proto.graph().input()) {
      if (inits.count(in.name())) continue;
      // Sequence/map/optional inputs: their .pb files are not TensorProtos.
      if (!in.type().has_tensor_type()) {
        return unsupported("input '" + in.name() + "' is not a tensor", "non-tensor types");
      }
      input_names.push_back(in.name());
    }
    bound = bind_resize_parameters(proto, data_sets, input_names);
    compiler::CompileOptions options;
    const auto inputs = sorted_files(data_sets[0], "input_");
    for (size_t i = 0; i < inputs.size() && i < input_names.size(); ++i) {
      if (bound.count(input_names[i])) continue;
      const rt::Tensor t = read_input(inputs[i].string(), proto, input_names[i]);
      options.import.input_shapes[input_names[i]] = t.shape();
    }
    auto model = onnx_io::import_model(proto, options.import);
    auto plan = compiler::compile_model(*model, options, dir.filename().string());
    const auto missing = rt::cpu::missing_cpu_ops(plan);
    if (!missing.empty())
      return unsupported("no CPU kernel for " + missing[0], op_in_message(missing[0]));
    executor = std::make_unique<rt::cpu::Executor>(std::move(plan));
  } catch (const Error& e) {
    return unsupported(e.what(), op_in_message(e.what()));
  }

  for (const auto& set : data_sets) {
    std::map<std::string, rt::Tensor> feeds;
    const auto inputs = sorted_files(set, "input_");
    for (size_t i = 0; i < inputs.size() && i < input_names.size(); ++i) {
      if (bound.count(input_names[i])) continue;
      feeds[input_names[i]] = read_input(inputs[i].string(), proto, input_names[i]);
    }
    std::map<std::string, rt::Tensor> got;
    try {
      got = executor->run(feeds);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.find("not supported") != std::string::npos)
        return unsupported(msg, op_in_message(msg));
      return {Outcome::kFailed, msg, ""};
    }
    const auto outputs = sorted_files(set, "output_");
    const auto& bindings = executor->plan().outputs();
    // Every expected output is compared, and the plan has no more and no fewer.
    if (outputs.size() != static_cast<size_t>(bindings.size())) {
      return {Outcome::kFailed,
              set.filename().string() + ": " + std::to_string(outputs.size()) +
                  " expected outputs, the plan has " + std::to_string(bindings.size()),
              ""};
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const rt::Tensor want = bf16_quirk(
          rt::io::read_tensor_pb(outputs[i].string()),
          static_cast<DType>(
              proto.graph().output(static_cast<int>(i)).type().tensor_type().elem_type()));
      const std::string diff = compare(got.at(bindings[i].name()), want, tol);
      if (!diff.empty()) {
        return {Outcome::kFailed,
                set.filename().string() + " output '" + bindings[i].name() + "': " + diff, ""};
      }
    }
  }
  return {};
}

}  // namespace

CaseResult run_case(const std::string& case_dir, const Tolerance& tol) {
  // Anything but an ampc::Error is a bug (in a kernel, the compiler or the runner): report
  // it as a failure of this case and go on with the others.
  try {
    return run_case_unguarded(case_dir, tol);
  } catch (const std::exception& e) {
    return {Outcome::kFailed, std::string("unexpected exception: ") + e.what(), ""};
  }
}

}  // namespace ampc::conformance
