#include "driver/memory_budget.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "frontend/onnx/export.h"
#include "frontend/onnx/import.h"
#include "frontend/onnx/read_model.h"
#include "lower/plan_memory.h"
#include "passes/constant_folding.h"
#include "report/plan_precision.h"
#include "runtime/plan/plan_file.h"
#include "runtime/plan/step_phase.h"
#include "runtime/state_copies.h"

namespace ampc::compiler {
namespace {

// A graph input's shape: as --input-shape fixes it, else as the model declares it.
std::vector<int64_t> input_dims(const onnx::ValueInfoProto& in,
                                const onnx_io::ImportOptions& import) {
  if (auto it = import.input_shapes.find(in.name()); it != import.input_shapes.end())
    return it->second;
  std::vector<int64_t> dims;
  for (const auto& d : in.type().tensor_type().shape().dim()) dims.push_back(d.dim_value());
  return dims;
}

// A gradient: a buffer the backward or the loss scaler writes (Step.source_phases).
bool written_by_backward(const plan::Step& s) {
  const plan::StepPhase phase = plan::first_phase(s);
  return phase == plan::BACKWARD || phase == plan::LOSS_SCALING;
}

std::string option(const plan::Plan& p, const std::string& key) {
  for (const auto& o : p.options())
    if (o.key() == key) return o.value();
  return {};
}

// Scales Reshape targets baked with batch `from` to batch `to` (see BatchCompiler); returns
// whether any changed.
bool rescale_reshapes(ir::Model& model, int64_t from, int64_t to) {
  bool changed = false;
  for (const auto& n : model.graph->nodes) {
    if (n->op_type != "Reshape" || n->inputs.size() < 2 || !n->inputs[0] || !n->inputs[1]) continue;
    ir::Value* data = n->inputs[0];
    ir::Value* shape = n->inputs[1];
    if (!shape->is_initializer() || !data->type.is_static() ||
        shape->initializer->dtype != DType::kInt64)
      continue;
    const auto& dims = *data->type.shape;
    std::vector<int64_t> s(static_cast<size_t>(shape->initializer->numel()));
    if (s.empty()) continue;
    std::memcpy(s.data(), shape->initializer->bytes.data(), s.size() * sizeof(int64_t));
    int64_t product = 1;
    bool inferred = false;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == -1)
        inferred = true;
      else
        product *= s[i] == 0 && i < dims.size() ? dims[i] : s[i];
    }
    const int64_t numel = ir::shape_numel(dims);
    const bool wrong = inferred
                           ? (!dims.empty() && dims[0] % to == 0 && s[0] == from * (dims[0] / to))
                           : product != numel;
    if (!wrong || s[0] <= 0 || s[0] % from != 0 || from == to) continue;
    s[0] = s[0] / from * to;
    std::memcpy(shape->initializer->bytes.data(), s.data(), s.size() * sizeof(int64_t));
    changed = true;
  }
  return changed;
}

std::string bytes_text(int64_t b) {
  char buf[48];
  if (b >= (int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  } else if (b >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

}  // namespace

MemoryBreakdown memory_breakdown(const plan::Plan& p) {
  MemoryBreakdown m;
  m.precision = option(p, "precision").empty() ? "fp32" : option(p, "precision");
  for (const auto& in : p.inputs()) {
    const auto& b = p.buffers(in.buffer());
    if (b.shape_size() > 0 && m.batch == 0) m.batch = b.shape(0);
  }
  std::map<int32_t, const plan::Step*> producer;
  for (const auto& s : p.steps())
    for (int32_t o : s.outputs())
      if (o >= 0) producer[o] = &s;
  for (const auto& b : p.buffers()) {
    if (b.role() != plan::STATE || b.alias_of() != 0) continue;
    const int64_t bytes = std::max<int64_t>(lower::buffer_bytes(b), 0);
    if (ampc::report::is_scaler_state(p, b.name()))
      m.scaler_state += bytes;
    else if (b.from_model())
      m.parameters += bytes;  // and running statistics
    else
      m.optimizer_state += bytes;
  }
  for (int32_t id : lower::arena_peak(p).buffers) {
    const auto& b = p.buffers(id);
    const int64_t bytes = std::max<int64_t>(lower::buffer_bytes(b), 0);
    const auto it = producer.find(id);
    const bool low_copy = it != producer.end() && it->second->op() == "Cast" &&
                          it->second->inputs_size() == 1 && it->second->inputs(0) >= 0 &&
                          p.buffers(it->second->inputs(0)).role() == plan::STATE;
    if (low_copy)
      m.low_copies_at_peak += bytes;
    else if (it != producer.end() && written_by_backward(*it->second))
      m.gradients_at_peak += bytes;
    else
      m.activations_at_peak += bytes;
  }
  m.state = p.memory().state_bytes();
  m.arena = p.memory().arena_bytes();
  m.constants = p.memory().constant_bytes();
  m.inputs = p.memory().input_bytes();
  m.workspace = p.memory().workspace_bytes();
  return m;
}

BatchCompiler::BatchCompiler(const std::string& model_path, CompileOptions options)
    : options_(std::move(options)) {
  onnx::ModelProto proto;
  if (plan::looks_like_plan(model_path)) {
    const plan::Plan p = plan::load_plan(model_path);
    if (p.training_model().empty())
      throw Error("'" + model_path +
                  "' is a forward plan: --memory needs a training plan or "
                  "the ONNX model");
    if (!proto.ParseFromString(p.training_model()))
      throw Error("'" + model_path + "': its embedded training model does not parse");
    proto.clear_training_info();  // the main graph is the forward pass and the loss
    // Its STATE initializers carry no data (plan.proto): the plan's initial values.
    std::map<std::string, const plan::Buffer*> buffers;
    for (const auto& b : p.buffers()) buffers[b.name()] = &b;
    for (auto& init : *proto.mutable_graph()->mutable_initializer()) {
      const auto it = buffers.find(init.name());
      if (it == buffers.end()) continue;
      // Parameters are the plan's STATE; other initializers are constants the compiler folded.
      if (it->second->role() == plan::STATE) parameters_.insert(init.name());
      if (init.raw_data().empty()) {
        const rt::Tensor t = rt::initial_value(p, *it->second);
        init.set_raw_data(t.raw(), t.nbytes());
      }
    }
    const std::string precision = option(p, "precision");
    if (!precision.empty() && precision != "fp32")
      throw Error("'" + model_path + "' was compiled for " + precision +
                  ": its forward graph holds autocast's casts, so it cannot be compiled for "
                  "fp32 again; give the ONNX model to `ampc inspect --memory`");
    // The training step as the plan has it: optimizer and loss scaling from its state.
    options_.optimizer.kind = "sgd";
    for (const auto& b : p.buffers()) {
      if (b.name().ends_with(".exp_avg")) options_.optimizer.kind = "adam";
      if (b.name().ends_with(".momentum_buffer")) options_.optimizer.momentum = 0.9;
    }
    for (const auto& o : p.options()) {
      if (o.key().rfind("input-shape.", 0) == 0)
        onnx_io::parse_input_shape(o.key().substr(12) + "=" + o.value(), options_.import);
      if (o.key() == kLossesOption) {
        std::stringstream list(o.value());
        for (std::string name; std::getline(list, name, ',');)
          options_.autodiff.losses.push_back(name);
      }
    }
  } else {
    proto = onnx_io::read_model_proto(model_path);
    onnx_io::resolve_external_data(proto, std::filesystem::path(model_path).parent_path().string());
  }
  model_bytes_ = proto.SerializeAsString();
  std::set<std::string> initializers;
  for (const auto& i : proto.graph().initializer()) initializers.insert(i.name());
  if (!plan::looks_like_plan(model_path)) parameters_ = initializers;
  for (const auto& in : proto.graph().input()) {
    if (initializers.count(in.name())) continue;
    const std::vector<int64_t> dims = input_dims(in, options_.import);
    if (dims.empty() || dims[0] <= 0) continue;
    if (model_batch_ == 0) model_batch_ = dims[0];
    if (dims[0] == model_batch_) batch_inputs_.push_back(in.name());
  }
  if (model_batch_ == 0)
    throw Error("'" + model_path + "' has no input with a static batch (first) dimension");
}

plan::Plan BatchCompiler::compile(int64_t batch, passes::Precision precision) const {
  onnx::ModelProto original;
  original.ParseFromString(model_bytes_);
  onnx::ModelProto proto = original;
  onnx_io::ImportOptions import = options_.import;
  import.training = false;
  for (const auto& in : proto.graph().input()) {
    if (std::find(batch_inputs_.begin(), batch_inputs_.end(), in.name()) == batch_inputs_.end())
      continue;
    std::vector<int64_t> dims = input_dims(in, options_.import);
    dims[0] = batch;
    import.input_shapes[in.name()] = dims;
  }
  std::unique_ptr<ir::Model> model;
  for (int round = 0;; ++round) {
    proto.mutable_graph()->clear_value_info();
    for (auto& out : *proto.mutable_graph()->mutable_output())
      out.mutable_type()->mutable_tensor_type()->clear_shape();
    model = onnx_io::import_model(proto, import);
    passes::fold_constants(*model);
    if (!rescale_reshapes(*model, model_batch_, batch)) break;
    if (round == 16)
      throw Error("the model's shapes do not settle at batch " + std::to_string(batch));
    proto = onnx_io::export_model(*model);
  }
  // The round trip through ONNX makes every folded constant an initializer of the "model":
  // only the source model's own initializers are parameters (trained, and treated as such by
  // autocast).
  for (ir::Value* v : model->graph->initializers) v->from_model = parameters_.count(v->name) > 0;
  CompileOptions o = options_;
  o.train = true;
  o.autocast.precision = precision;
  o.lowering.target = "cpu";  // the memory plan is the same; no PTX while searching
  o.import = import;
  o.warn = [](const std::string&) {};  // the model's compile says them, not every batch tried
  return compile_model(*model, o, "batch " + std::to_string(batch));
}

BatchSearch largest_batch(const BatchCompiler& c, passes::Precision precision, int64_t budget) {
  BatchSearch r;
  std::map<int64_t, MemoryBreakdown> seen;
  auto fits = [&](int64_t b) {
    auto it = seen.find(b);
    if (it == seen.end()) {
      it = seen.emplace(b, memory_breakdown(c.compile(b, precision))).first;
      ++r.compiles;
    }
    return it->second.total() <= budget;
  };
  if (!fits(1)) {
    r.above = seen.at(1);
    return r;
  }
  int64_t lo = 1, hi = 2;
  while (fits(hi)) {
    lo = hi;
    if (hi >= (int64_t{1} << 31)) throw Error("more than 2^31 samples fit: nothing to search");
    hi *= 2;
  }
  while (hi - lo > 1) {  // lo fits, hi does not
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  r.largest = lo;
  r.at_largest = seen.at(lo);
  r.above = seen.at(hi);
  return r;
}

int64_t parse_bytes(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  double v = 0;
  try {
    v = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    throw Error("--device-memory '" + text + "': expected a size such as 80GiB or 141GB");
  }
  std::string unit = text.substr(i);
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const std::map<std::string, double> units = {{"", 1},
                                                      {"b", 1},
                                                      {"kib", 1024.0},
                                                      {"mib", 1048576.0},
                                                      {"gib", 1073741824.0},
                                                      {"tib", 1099511627776.0},
                                                      {"kb", 1e3},
                                                      {"mb", 1e6},
                                                      {"gb", 1e9},
                                                      {"tb", 1e12}};
  const auto it = units.find(unit);
  if (it == units.end() || v <= 0)
    throw Error("--device-memory '" + text + "': expected a size such as 80GiB or 141GB");
  return static_cast<int64_t>(std::llround(v * it->second));
}

std::string memory_table_text(
    const std::vector<MemoryBreakdown>& cols,
    const std::vector<std::pair<int64_t, std::vector<BatchSearch>>>& searches) {
  std::string out;
  char line[256];
  auto row = [&](const char* name, auto get) {
    std::snprintf(line, sizeof line, "  %-44s", name);
    out += line;
    for (const auto& c : cols) {
      std::snprintf(line, sizeof line, " %16s", bytes_text(get(c)).c_str());
      out += line;
    }
    out += '\n';
  };
  std::snprintf(line, sizeof line, "  %-44s", "planned bytes (batch)");
  out += line;
  for (const auto& c : cols) {
    std::snprintf(line, sizeof line, " %16s",
                  (c.precision + " (" + std::to_string(c.batch) + ")").c_str());
    out += line;
  }
  out += '\n';
  row("parameters (fp32 masters)", [](const auto& c) { return c.parameters; });
  row("optimizer state", [](const auto& c) { return c.optimizer_state; });
  row("loss-scaler state", [](const auto& c) { return c.scaler_state; });
  row("state region (planned)", [](const auto& c) { return c.state; });
  row("arena (planned, reused across the step)", [](const auto& c) { return c.arena; });
  row("  at its peak: low-precision parameter copies",
      [](const auto& c) { return c.low_copies_at_peak; });
  row("  at its peak: gradients (backward values)",
      [](const auto& c) { return c.gradients_at_peak; });
  row("  at its peak: activations", [](const auto& c) { return c.activations_at_peak; });
  row("constants", [](const auto& c) { return c.constants; });
  row("inputs (one batch)", [](const auto& c) { return c.inputs; });
  row("workspace (cuBLASLt)", [](const auto& c) { return c.workspace; });
  row("total", [](const auto& c) { return c.total(); });
  for (const auto& [budget, results] : searches) {
    out += "\nlargest batch in " + bytes_text(budget) + " = " + std::to_string(budget) +
           " B (found by planning):\n";
    for (size_t i = 0; i < results.size() && i < cols.size(); ++i) {
      const BatchSearch& s = results[i];
      if (s.largest == 0) {
        std::snprintf(line, sizeof line, "  %-6s none: batch 1 needs %s\n",
                      cols[i].precision.c_str(),
                      s.above ? bytes_text(s.above->total()).c_str() : "?");
      } else {
        std::snprintf(
            line, sizeof line, "  %-6s %lld (total %lld B; batch %lld needs %lld B; %d compiles)\n",
            cols[i].precision.c_str(), static_cast<long long>(s.largest),
            static_cast<long long>(s.at_largest.total()), static_cast<long long>(s.largest + 1),
            static_cast<long long>(s.above ? s.above->total() : -1), s.compiles);
      }
      out += line;
    }
  }
  return out;
}

}  // namespace ampc::compiler
