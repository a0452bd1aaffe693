#include "report/step_view.h"

#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "base/dtype.h"
#include "base/error.h"
#include "report/plan_precision.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/plan/step_params.h"

namespace ampc::report {
namespace {

using plan::buffer_bytes;

std::string short_dtype(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat64:
      return "fp64";
    case DType::kUndefined:
      return "";
    default:
      return std::string(dtype_name(t));
  }
}

std::string short_dtype(int32_t code) {
  return dtype_is_known(code) ? short_dtype(static_cast<DType>(code)) : "";
}

// "f16[32,64]" for a plan buffer.
std::string buffer_type(const plan::Buffer& b) {
  if (!dtype_is_known(b.dtype())) return "?";
  ir::TensorType t{static_cast<DType>(b.dtype()), std::nullopt};
  if (b.shape_known()) t.shape = std::vector<int64_t>(b.shape().begin(), b.shape().end());
  return t.str();
}

int64_t value_bytes(const ir::TensorType& t) {
  if (!t.is_static()) return -1;
  int64_t n = 1;
  for (int64_t d : *t.shape) n *= d;
  return n * static_cast<int64_t>(dtype_size(t.dtype));
}

const char* region_name(plan::MemoryRegion r) {
  switch (r) {
    case plan::REGION_ARENA:
      return "arena";
    case plan::REGION_STATE:
      return "state";
    case plan::REGION_CONSTANTS:
      return "constants";
    case plan::REGION_INPUTS:
      return "inputs";
    default:
      return "";
  }
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The op of a kernel member the graph does not know (a forward plan has no graph), from the
// names the passes and torch give: "autocast/..." casts, "grad//fc1/Gemm/Mul_node_3" -> Mul,
// "/act/Mul_1" -> Mul.
std::string op_from_name(const std::string& name) {
  if (name.find("autocast/") != std::string::npos || starts_with(name, "half_inputs/"))
    return "Cast";
  std::string last = name.substr(name.find_last_of('/') + 1);
  if (const size_t at = last.find("_node_"); at != std::string::npos) return last.substr(0, at);
  const size_t underscore = last.find_last_of('_');
  if (underscore != std::string::npos && underscore + 1 < last.size() &&
      last.find_first_not_of("0123456789", underscore + 1) == std::string::npos)
    last.resize(underscore);
  return last.empty() ? "?" : last;
}

std::vector<std::string> split_scope(const std::string& name) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : name) {
    if (c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

// Collects tensors by name and nodes in plan order.
class Builder {
 public:
  Builder(const plan::Plan& plan, const ir::Model* graph) : plan_(plan), graph_(graph) {
    for (const auto& b : plan.buffers()) buffers_[b.name()] = &b;
    if (graph) {
      for (const auto& n : graph->graph->nodes) graph_nodes_[n->name] = n.get();
    }
    for (const auto& d : plan.precision_decisions()) decisions_[d.node()] = &d;
    // The plan's precision report (stored at compile time, or made from its steps) has a
    // rule for every node, also those autocast did not decide (loss scaling, skip-step).
    try {
      const PrecisionReport r = precision_report_of_plan(plan);
      for (const auto& n : r.nodes) report_[n.node] = {short_dtype(n.compute_dtype), n.rule};
      for (const auto& c : r.casts) cast_bytes_[c.node] = c.bytes_moved;
    } catch (const Error&) {
      // A plan whose report cannot be made is still drawn, with the dtypes of its buffers.
    }
  }

  StepView build() {
    for (const auto& b : plan_.inputs()) add_input(b.name());
    for (int64_t s = 0; s < plan_.steps_size(); ++s) add_step(s, plan_.steps(static_cast<int>(s)));
    return std::move(view_);
  }

 private:
  int tensor(const std::string& name, const ir::Value* v) {
    if (auto it = tensor_index_.find(name); it != tensor_index_.end()) return it->second;
    ViewTensor t;
    t.name = name;
    t.found_inf = !plan_.training().found_inf().empty() && name == plan_.training().found_inf();
    if (auto it = buffers_.find(name); it != buffers_.end()) {
      const plan::Buffer& b = *it->second;
      t.type = buffer_type(b);
      t.dtype = short_dtype(b.dtype());
      t.bytes = buffer_bytes(b);
      t.region = region_name(b.region());
      if (!t.region.empty()) t.offset = b.offset();
      if (b.alias_of() > 0 && b.alias_of() <= plan_.buffers_size())
        t.alias_of = plan_.buffers(b.alias_of() - 1).name();
    } else {
      t.internal = true;
      if (v) {
        t.type = v->type.str();
        t.dtype = short_dtype(v->type.dtype);
        t.bytes = value_bytes(v->type);
      }
    }
    view_.tensors.push_back(std::move(t));
    const int index = static_cast<int>(view_.tensors.size()) - 1;
    tensor_index_[name] = index;
    return index;
  }

  void add_input(const std::string& name) {
    ViewNode n;
    n.name = name;
    n.op = "Input";
    n.phase = kPhaseInputs;
    n.outputs.push_back(tensor(name, nullptr));
    n.dtype = view_.tensors[n.outputs[0]].dtype;
    view_.nodes.push_back(std::move(n));
  }

  // The step's buffers that a node reads or writes (by id, -1 omitted).
  std::vector<int> buffer_tensors(const google::protobuf::RepeatedField<int32_t>& ids) {
    std::vector<int> out;
    for (int32_t id : ids) {
      if (id < 0 || id >= plan_.buffers_size()) continue;
      const plan::Buffer& b = plan_.buffers(id);
      if (b.role() == plan::CONSTANT) continue;  // weights are listed, not drawn as edges
      out.push_back(tensor(b.name(), nullptr));
    }
    return out;
  }

  void add_step(int64_t index, const plan::Step& step) {
    std::vector<std::string> members(step.source_nodes().begin(), step.source_nodes().end());
    if (members.empty()) members.push_back(step.op() + "#" + std::to_string(index));
    const bool grouped = !step.kernel().empty() || members.size() > 1;
    const std::string epilogue = plan::gemm_epilogue_name(step);
    const std::string kernel = !step.kernel().empty() ? step.kernel()
                               : grouped ? step.op() + (epilogue.empty() ? "" : "+" + epilogue) +
                                               " #" + std::to_string(index)
                                         : "";
    for (size_t m = 0; m < members.size(); ++m) {
      ViewNode n;
      n.name = members[m];
      n.step = index;
      n.kernel = kernel;
      const ir::Node* g = nullptr;
      if (auto it = graph_nodes_.find(members[m]); it != graph_nodes_.end()) g = it->second;
      if (g) {
        n.op =
            g->domain.empty() || g->domain == "ai.onnx" ? g->op_type : g->domain + "." + g->op_type;
        for (const ir::Value* v : g->inputs) {
          if (!v) continue;
          if (v->is_initializer() && !buffers_.count(v->name)) continue;  // folded constant
          if (auto it = buffers_.find(v->name);
              it != buffers_.end() && it->second->role() == plan::CONSTANT)
            continue;
          n.inputs.push_back(tensor(v->name, v));
        }
        for (const ir::Value* v : g->outputs)
          if (v) n.outputs.push_back(tensor(v->name, v));
      } else if (!grouped) {
        n.op = step.domain().empty() ? step.op() : step.domain() + "." + step.op();
        n.inputs = buffer_tensors(step.inputs());
        n.outputs = buffer_tensors(step.outputs());
      } else {
        // A kernel member the graph does not know: the kernel's operands enter at its first
        // member and leave at its last; members pass an internal value along in between.
        n.op = op_from_name(n.name);
        if (m == 0) n.inputs = buffer_tensors(step.inputs());
        if (m > 0) n.inputs.push_back(tensor(kernel + ":" + std::to_string(m - 1), nullptr));
        if (m + 1 == members.size()) {
          n.outputs = buffer_tensors(step.outputs());
        } else {
          n.outputs.push_back(tensor(kernel + ":" + std::to_string(m), nullptr));
        }
      }
      bool reads_found_inf = false;
      for (int t : n.inputs) reads_found_inf |= view_.tensors[t].found_inf;
      const plan::StepPhase phase = m < static_cast<size_t>(step.source_phases_size())
                                        ? step.source_phases(static_cast<int>(m))
                                        : plan::FORWARD;
      n.phase = phase_of(phase, n.op, reads_found_inf);
      n.scope = scope_of(n.name);
      n.inserted_cast = n.op == "Cast" && (n.name.find("autocast/") != std::string::npos ||
                                           starts_with(n.name, "half_inputs/"));
      if (auto it = cast_bytes_.find(n.name); n.inserted_cast && it != cast_bytes_.end()) {
        n.cast_bytes = it->second;
      } else if (n.inserted_cast && !n.outputs.empty()) {
        const ViewTensor& out = view_.tensors[n.outputs[0]];
        const ViewTensor* in = n.inputs.empty() ? nullptr : &view_.tensors[n.inputs[0]];
        if (out.bytes >= 0 && in && in->bytes >= 0) n.cast_bytes = out.bytes + in->bytes;
      }
      set_precision(n);
      view_.nodes.push_back(std::move(n));
    }
  }

  // The recorded decision, else the node's first float output (its first output else).
  void set_precision(ViewNode& n) {
    if (auto it = report_.find(n.name); it != report_.end()) {
      n.dtype = it->second.first;
      n.rule = it->second.second;
      return;
    }
    if (auto it = decisions_.find(n.name); it != decisions_.end()) {
      n.dtype = short_dtype(it->second->compute_dtype());
      n.rule = it->second->rule();
      return;
    }
    for (int t : n.outputs) {
      const std::string& d = view_.tensors[t].dtype;
      if (d == "fp32" || d == "fp16" || d == "bf16" || d == "fp64") {
        n.dtype = d;
        return;
      }
    }
    if (!n.outputs.empty()) n.dtype = view_.tensors[n.outputs[0]].dtype;
  }

  const plan::Plan& plan_;
  const ir::Model* graph_;
  std::unordered_map<std::string, const plan::Buffer*> buffers_;
  std::unordered_map<std::string, const ir::Node*> graph_nodes_;
  std::unordered_map<std::string, const plan::PrecisionDecision*> decisions_;
  std::unordered_map<std::string, std::pair<std::string, std::string>> report_;  // dtype, rule
  std::unordered_map<std::string, int64_t> cast_bytes_;
  std::unordered_map<std::string, int> tensor_index_;
  StepView view_;
};

// The optimizer's nodes are named by counter only ("optimizer/Mul_node_8"): each is put in
// a scope named for the parameter it updates, the parameter (a state tensor the forward
// reads) whose name prefixes a state tensor it reads ("fc1.weight.exp_avg"), or else the
// parameter of the node that produced one of its inputs.
void scope_optimizer_by_parameter(StepView& view) {
  std::set<std::string> parameters;
  for (const auto& n : view.nodes) {
    if (n.phase != kPhaseForward) continue;
    for (int t : n.inputs)
      if (view.tensors[t].region == "state") parameters.insert(view.tensors[t].name);
  }
  auto parameter_of = [&](const std::string& state) -> std::string {
    for (std::string p = state;;) {
      if (parameters.count(p)) return p;
      const size_t dot = p.rfind('.');
      if (dot == std::string::npos) return {};
      p.resize(dot);
    }
  };
  std::vector<std::string> produced_for(view.tensors.size());  // tensor -> parameter
  for (auto& n : view.nodes) {
    if (n.phase != kPhaseOptimizer && n.phase != kPhaseSkipStep) continue;
    std::string parameter;
    for (int t : n.inputs)
      if (parameter.empty() && view.tensors[t].region == "state")
        parameter = parameter_of(view.tensors[t].name);
    for (int t : n.inputs)
      if (parameter.empty()) parameter = produced_for[t];
    if (parameter.empty()) continue;
    for (int t : n.outputs) produced_for[t] = parameter;
    if (n.scope.empty()) n.scope = {parameter};
  }
}

}  // namespace

const std::vector<std::string>& view_phases() {
  static const std::vector<std::string> phases = {
      kPhaseInputs,    kPhaseForward,  kPhaseBackward,  kPhaseLossScaling,
      kPhaseOptimizer, kPhaseSkipStep, kPhaseStatistics};
  return phases;
}

std::string phase_of(plan::StepPhase phase, const std::string& op, bool reads_found_inf) {
  if (reads_found_inf && op == "Where") return kPhaseSkipStep;
  return plan::phase_name(phase);  // kPhaseForward ... kPhaseStatistics
}

std::vector<std::string> scope_of(const std::string& node_name) {
  std::vector<std::string> parts = split_scope(node_name);
  if (!parts.empty() &&
      (parts[0] == "grad" || parts[0] == "amp" || parts[0] == "optimizer" || parts[0] == "stats"))
    parts.erase(parts.begin());
  if (!parts.empty()) parts.pop_back();  // the node's own name
  // An inserted cast sits in the scope of the value it casts.
  std::erase_if(parts, [](const std::string& p) { return p == "autocast" || p == "half_inputs"; });
  return parts;
}

StepView build_step_view(const plan::Plan& plan, const ir::Model* graph, const std::string& title,
                         const std::string& origin) {
  StepView view = Builder(plan, graph).build();
  scope_optimizer_by_parameter(view);
  view.title = title;
  view.origin = origin;
  view.precision = "fp32";
  for (const auto& o : plan.options())
    if (o.key() == "precision") view.precision = o.value();
  return view;
}

void attach_grad_stats(StepView& view, const std::string& jsonl_path) {
  std::ifstream in(jsonl_path);
  if (!in) throw Error("--grad-stats: cannot read '" + jsonl_path + "'");
  std::map<std::string, nlohmann::json> by_tensor;  // the last recorded step wins
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_discarded() || !r.is_object() || !r.contains("tensor") || !r["tensor"].is_string())
      throw Error("--grad-stats: line " + std::to_string(line_no) + " of '" + jsonl_path +
                  "' is not a range-statistics record (ampc train --grad-stats)");
    const std::string tensor = r["tensor"].get<std::string>();
    by_tensor[tensor] = std::move(r);
  }
  std::map<std::string, std::vector<int>> node_index;
  for (size_t i = 0; i < view.nodes.size(); ++i)
    node_index[view.nodes[i].name].push_back(static_cast<int>(i));
  for (auto& t : view.tensors)
    if (auto it = by_tensor.find(t.name); it != by_tensor.end()) t.grad = it->second;
  for (const auto& [tensor, r] : by_tensor) {
    if (!r.contains("node") || !r["node"].is_string()) continue;
    auto it = node_index.find(r["node"].get<std::string>());
    if (it == node_index.end()) continue;
    for (int i : it->second) view.nodes[i].grad = r;
  }
}

nlohmann::json step_view_json(const StepView& view) {
  nlohmann::json j;
  j["title"] = view.title;
  j["precision"] = view.precision;
  j["origin"] = view.origin;
  j["phases"] = view_phases();
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : view.nodes) {
    nlohmann::json o;
    o["name"] = n.name;
    o["op"] = n.op;
    o["phase"] = n.phase;
    o["scope"] = n.scope;
    o["dtype"] = n.dtype;
    o["rule"] = n.rule;
    o["cast"] = n.inserted_cast;
    o["cast_bytes"] = n.cast_bytes;
    o["kernel"] = n.kernel;
    o["step"] = n.step;
    o["in"] = n.inputs;
    o["out"] = n.outputs;
    o["grad"] = n.grad;
    o["change"] = n.change;
    nodes.push_back(std::move(o));
  }
  j["nodes"] = std::move(nodes);
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : view.tensors) {
    nlohmann::json o;
    o["name"] = t.name;
    o["type"] = t.type;
    o["dtype"] = t.dtype;
    o["bytes"] = t.bytes;
    o["region"] = t.region;
    o["offset"] = t.offset;
    o["alias_of"] = t.alias_of;
    o["internal"] = t.internal;
    o["found_inf"] = t.found_inf;
    o["grad"] = t.grad;
    tensors.push_back(std::move(o));
  }
  j["tensors"] = std::move(tensors);
  return j;
}

}  // namespace ampc::report
