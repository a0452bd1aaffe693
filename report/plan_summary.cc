#include "report/plan_summary.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "lower/plan_memory.h"
#include "runtime/plan/plan_stats.h"
#include "runtime/plan/step_params.h"

namespace ampc::report {
namespace {

using json = nlohmann::ordered_json;

std::string option(const plan::Plan& p, const std::string& key, const std::string& fallback) {
  for (const auto& o : p.options()) {
    if (o.key() == key) return o.value();
  }
  return fallback;
}

std::string dtype_str(int32_t code) {
  return dtype_is_known(code) ? std::string(dtype_name(static_cast<DType>(code)))
                              : "dtype " + std::to_string(code);
}

json buffer_json(const plan::Buffer& b) {
  json j;
  j["name"] = b.name();
  j["dtype"] = dtype_str(b.dtype());
  j["shape"] = b.shape_known() ? json(std::vector<int64_t>(b.shape().begin(), b.shape().end()))
                               : json(nullptr);
  return j;
}

// "a, b, c"; longer lists as "first, ... (+k more), last".
std::string abbreviate(const std::vector<std::string>& items) {
  if (items.size() > 3)
    return items.front() + ", ... (+" + std::to_string(items.size() - 2) + " more), " +
           items.back();
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

// "1,234,567 B (1.2 MiB)".
std::string bytes_str(int64_t b) {
  std::string digits = std::to_string(b);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  std::ostringstream os;
  os << digits << " B";
  if (b >= 1024 * 1024) {
    os << std::fixed << std::setprecision(1) << " (" << b / (1024.0 * 1024.0) << " MiB)";
  } else if (b >= 1024) {
    os << std::fixed << std::setprecision(1) << " (" << b / 1024.0 << " KiB)";
  }
  return os.str();
}

std::string op_name(const plan::Step& s) {
  return s.domain().empty() ? s.op() : s.domain() + "." + s.op();
}

// The kernel's name in the list: the fused kernel's, " x N" for N segments; else the op.
std::string kernel_name(const plan::Step& s) {
  if (s.kernel().empty()) return op_name(s);
  return s.segments() > 1 ? s.kernel() + " x " + std::to_string(s.segments()) : s.kernel();
}

// A MatMul's strided views (GemmParams.perm_a / perm_b / perm_y) as "a(0,2,1,3) y(0,2,1,3)";
// empty without any.
std::string gemm_views(const plan::Step& step) {
  if (!step.has_gemm()) return "";
  std::string text;
  auto add = [&](const char* operand, const google::protobuf::RepeatedField<int64_t>& perm) {
    if (perm.empty()) return;
    text += (text.empty() ? "" : " ") + std::string(operand) + "(";
    for (int i = 0; i < perm.size(); ++i) text += (i ? "," : "") + std::to_string(perm[i]);
    text += ")";
  };
  add("a", step.gemm().perm_a());
  add("b", step.gemm().perm_b());
  add("y", step.gemm().perm_y());
  return text;
}

json kernel_list(const plan::Plan& p) {
  json list = json::array();
  int64_t index = 0;
  for (int s = 0; s < p.steps_size(); ++s) {
    const plan::Step& step = p.steps(s);
    if (plan::is_view_step(step)) continue;
    json k;
    k["index"] = index++;
    k["step"] = s;
    k["name"] = kernel_name(step);
    k["op"] = op_name(step);
    k["kernel"] = step.kernel().empty() ? json(nullptr) : json(step.kernel());
    k["segments"] = std::max(1, step.segments());
    k["nodes"] = std::vector<std::string>(step.source_nodes().begin(), step.source_nodes().end());
    k["outputs"] = json::array();
    for (int32_t o : step.outputs()) {
      if (o >= 0 && o < p.buffers_size()) {
        json out = buffer_json(p.buffers(o));
        out.erase("name");
        k["outputs"].push_back(out);
      }
    }
    const std::string epilogue = plan::gemm_epilogue_name(step);
    k["epilogue"] = epilogue.empty() ? json(nullptr) : json(epilogue);
    const std::string views = gemm_views(step);
    k["views"] = views.empty() ? json(nullptr) : json(views);
    list.push_back(k);
  }
  return list;
}

// Storage of the arena's buffers without reuse: what every buffer owning storage takes.
int64_t activation_bytes(const plan::Plan& p) {
  int64_t total = 0;
  const int64_t align = std::max<int64_t>(1, p.memory().alignment());
  for (const auto& b : p.buffers()) {
    if (b.region() != plan::REGION_ARENA || b.alias_of() > 0) continue;
    const int64_t bytes = lower::buffer_bytes(b);
    if (bytes > 0) total += (bytes + align - 1) / align * align;
  }
  return total;
}

// Buffers without a region: in the arena (ACTIVATION, OUTPUT) or elsewhere.
int64_t unplanned_buffers(const plan::Plan& p, bool arena) {
  return std::count_if(p.buffers().begin(), p.buffers().end(), [arena](const plan::Buffer& b) {
    const bool in_arena = b.role() == plan::ACTIVATION || b.role() == plan::OUTPUT;
    return b.region() == plan::REGION_NONE && in_arena == arena;
  });
}

json notes(const plan::Plan& p) {
  json n = json::array();
  if (p.memory().alignment() == 0) {
    n.push_back("the plan has no memory plan (compiled by an older ampc)");
    return n;
  }
  if (const int64_t k = unplanned_buffers(p, true); k > 0)
    n.push_back(std::to_string(k) +
                " buffers have no static shape: the arena is not planned (such plans run on "
                "the CPU backend only)");
  if (const int64_t k = unplanned_buffers(p, false); k > 0)
    n.push_back(std::to_string(k) +
                " inputs, constants or state buffers have no static size (unknown shape or "
                "strings): not planned");
  if (p.memory().workspace_bytes() > 0)
    n.push_back("workspace: cuBLASLt's; cuDNN workspaces are sized when the plan is loaded");
  return n;
}

json peak_json(const plan::Plan& p) {
  const lower::ArenaPeak peak = lower::arena_peak(p);
  json j;
  j["step"] = peak.step;
  j["bytes"] = peak.bytes;
  std::map<std::string, int64_t> by_dtype;
  json buffers = json::array();
  for (int32_t b : peak.buffers) {
    const plan::Buffer& buf = p.buffers(b);
    json e = buffer_json(buf);
    e["bytes"] = lower::buffer_bytes(buf);
    by_dtype[dtype_str(buf.dtype())] += lower::buffer_bytes(buf);
    buffers.push_back(e);
  }
  j["by_dtype"] = by_dtype;
  j["buffers"] = buffers;
  return j;
}

double ratio(int64_t a, int64_t b) {
  return b > 0 ? static_cast<double>(a) / b : 0.0;
}

std::string outputs_text(const json& outputs) {
  std::vector<std::string> items;
  for (const auto& o : outputs) {
    std::string s = o["dtype"].get<std::string>() + "[";
    if (o["shape"].is_null()) {
      s += "?";
    } else {
      for (size_t i = 0; i < o["shape"].size(); ++i)
        s += (i ? "," : "") + std::to_string(o["shape"][i].get<int64_t>());
    }
    items.push_back(s + "]");
  }
  return abbreviate(items);
}

void memory_text(const plan::Plan& p, const json& j, std::ostringstream& os) {
  const plan::MemoryPlan& m = p.memory();
  os << "\nmemory";
  if (m.alignment() == 0) {
    os << ": not planned (the plan was compiled by an older ampc)\n";
    return;
  }
  os << " (offsets aligned to " << m.alignment() << " B)\n";
  if (unplanned_buffers(p, true) > 0) {
    os << "  arena        not planned: " << unplanned_buffers(p, true)
       << " buffers have no static shape (such plans run on the CPU backend only)\n";
  } else {
    os << "  arena        " << bytes_str(m.arena_bytes()) << "\n"
       << "  lower bound  " << bytes_str(m.arena_lower_bound_bytes())
       << " (most bytes live at one step): arena / bound " << std::fixed << std::setprecision(3)
       << ratio(m.arena_bytes(), m.arena_lower_bound_bytes()) << "\n"
       << "  activations  " << bytes_str(j["activation_bytes"].get<int64_t>())
       << " without reuse\n";
  }
  os << "  state        " << bytes_str(m.state_bytes()) << "\n"
     << "  constants    " << bytes_str(m.constant_bytes()) << "\n"
     << "  inputs       " << bytes_str(m.input_bytes()) << "\n"
     << "  workspace    " << bytes_str(m.workspace_bytes());
  if (m.workspace_bytes() > 0) os << ": cuBLASLt; cuDNN workspaces are sized at load time";
  os << "\n";
  if (const int64_t k = unplanned_buffers(p, false); k > 0)
    os << "  unplanned    " << k << " inputs, constants or state buffers without a static size\n";

  const json& peak = j["arena_peak"];
  if (peak["step"].get<int64_t>() < 0) return;
  const int64_t step = peak["step"].get<int64_t>();
  os << "\narena peak: " << peak["buffers"].size() << " buffers, "
     << bytes_str(peak["bytes"].get<int64_t>()) << " with sizes rounded to " << m.alignment()
     << " B, live at ";
  if (step < p.steps_size()) {
    const plan::Step& s = p.steps(step);
    int64_t kernel = 0;
    for (int i = 0; i < step; ++i) kernel += plan::is_view_step(p.steps(i)) ? 0 : 1;
    os << "step " << step << " ("
       << (plan::is_view_step(s) ? "view" : "kernel " + std::to_string(kernel)) << ": "
       << kernel_name(s) << (s.source_nodes_size() ? ", " + s.source_nodes(0) : "") << ")\n";
  } else {
    os << "the end of the step (outputs and state updates)\n";
  }
  os << "  by dtype:";
  bool first = true;
  for (const auto& [dtype, bytes] : peak["by_dtype"].items()) {
    os << (first ? " " : ", ") << dtype << ' ' << bytes_str(bytes.get<int64_t>());
    first = false;
  }
  os << "\n";
  const size_t shown = std::min<size_t>(peak["buffers"].size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    const json& b = peak["buffers"][i];
    json out = b;
    out.erase("name");
    out.erase("bytes");
    os << "  " << std::right << std::setw(14) << b["bytes"].get<int64_t>() << " B  " << std::left
       << std::setw(20) << outputs_text(json::array({out})) << "  " << b["name"].get<std::string>()
       << "\n";
  }
  if (peak["buffers"].size() > shown)
    os << "  ... (+" << peak["buffers"].size() - shown << " more)\n";
}

}  // namespace

json plan_summary_json(const plan::Plan& p) {
  const plan::MemoryPlan& m = p.memory();
  json j;
  j["model"] = p.model_name();
  j["target"] = p.target();
  j["precision"] = option(p, "precision", "fp32");
  // A training plan's BatchNorm running-variance update ("unbiased": PyTorch's, "biased":
  // ONNX's); null without one.
  const std::string running_var = option(p, "batchnorm-running-var", "");
  j["batchnorm_running_var"] = running_var.empty() ? json(nullptr) : json(running_var);
  j["steps"] = p.steps_size();
  j["kernels"] = plan::count_kernels(p);
  j["kernel_list"] = kernel_list(p);
  j["memory_planned"] = m.alignment() > 0 && unplanned_buffers(p, true) == 0;
  j["alignment"] = m.alignment();
  j["arena_bytes"] = m.arena_bytes();
  j["arena_lower_bound_bytes"] = m.arena_lower_bound_bytes();
  j["arena_ratio"] = ratio(m.arena_bytes(), m.arena_lower_bound_bytes());
  j["activation_bytes"] = activation_bytes(p);
  j["state_bytes"] = m.state_bytes();
  j["constant_bytes"] = m.constant_bytes();
  j["input_bytes"] = m.input_bytes();
  j["workspace_bytes"] = m.workspace_bytes();
  j["arena_peak"] = peak_json(p);
  j["notes"] = notes(p);
  return j;
}

std::string plan_summary_text(const plan::Plan& p, const std::string& title) {
  const json j = plan_summary_json(p);
  std::ostringstream os;
  os << title << "\n"
     << "  model      " << p.model_name() << "\n"
     << "  target     " << (p.target().empty() ? "(not recorded)" : p.target()) << "\n"
     << "  precision  " << j["precision"].get<std::string>() << "\n";
  if (!j["batchnorm_running_var"].is_null()) {
    const bool unbiased = j["batchnorm_running_var"] == "unbiased";
    os << "  batchnorm  running variance from the batch's "
       << (unbiased ? "unbiased variance (PyTorch's nn.BatchNorm)"
                    : "biased variance (ONNX's BatchNormalization)")
       << "\n";
  }
  os << "  steps      " << p.steps_size() << "\n"
     << "  kernels    " << j["kernels"].get<int64_t>() << "\n"
     << "\nkernels, in execution order (outputs; ONNX nodes)\n";
  for (const json& k : j["kernel_list"]) {
    std::vector<std::string> nodes = k["nodes"].get<std::vector<std::string>>();
    os << "  " << std::right << std::setw(5) << k["index"].get<int64_t>() << "  " << std::left
       << std::setw(28) << k["name"].get<std::string>() << "  " << outputs_text(k["outputs"]);
    if (!k["epilogue"].is_null()) os << "  epilogue " << k["epilogue"].get<std::string>();
    if (!k["views"].is_null()) os << "  views " << k["views"].get<std::string>();
    os << "  <- " << abbreviate(nodes) << "\n";
  }
  memory_text(p, j, os);
  return os.str();
}

const kernels::KernelDef& find_kernel(const plan::Plan& p, const std::string& name) {
  for (const auto& k : p.kernels()) {
    if (k.name() == name) return k;
  }
  if (p.kernels_size() == 0)
    throw Error("no kernel '" + name +
                "' in the plan: it has no fused kernels (compiled with --no-fusion, or nothing "
                "to fuse)");
  std::vector<std::string> names;
  for (const auto& k : p.kernels()) names.push_back(k.name());
  throw Error("no kernel '" + name + "' in the plan; its " + std::to_string(names.size()) +
              " kernels: " + abbreviate(names));
}

std::string target_sm(const plan::Plan& p) {
  const std::string& t = p.target();
  return t.rfind("cuda:", 0) == 0 ? t.substr(5) : "";
}

std::string kernel_ptx(const plan::Plan& p, const kernels::KernelDef& kernel) {
  if (p.target() == "cpu") throw Error("no PTX: compiled with --target cpu");
  const std::string sm = target_sm(p);
  if (sm.empty()) throw Error("no PTX: the plan records no CUDA target");
  for (const auto& code : kernel.code()) {
    if (code.target() == sm) return code.ptx();
  }
  throw Error("no PTX for " + sm + " in kernel '" + kernel.name() + "'");
}

std::string kernel_def_text(const plan::Plan& p, const kernels::KernelDef& k) {
  std::ostringstream os;
  os << "kernel " << k.name() << "\n  iteration space  ";
  if (k.flat()) {
    os << "flat (element count at run time)";
  } else {
    os << "[";
    for (int i = 0; i < k.shape_size(); ++i) os << (i ? "," : "") << k.shape(i);
    os << "]";
  }
  if (k.guard() > 0) os << ", guarded by input " << k.guard() - 1;
  os << "\n  inputs\n";
  for (int i = 0; i < k.inputs_size(); ++i) {
    const auto& in = k.inputs(i);
    os << "    " << i << "  " << dtype_str(in.dtype());
    if (in.scalar()) os << " scalar";
    if (in.strides_size()) {
      os << " strides [";
      for (int d = 0; d < in.strides_size(); ++d) os << (d ? "," : "") << in.strides(d);
      os << "]";
    }
    os << "\n";
  }
  os << "  body\n";
  for (int i = 0; i < k.body_size(); ++i) {
    const auto& ins = k.body(i);
    os << "    %" << i << " = " << ins.op() << ' ' << dtype_str(ins.dtype());
    if (ins.op() == "load") os << " input " << ins.operand();
    if (ins.op() == "const") os << ' ' << std::setprecision(17) << ins.value();
    for (int32_t a : ins.args()) os << " %" << a;
    for (int64_t a : ins.iattrs()) os << " #" << a;
    os << "\n";
  }
  os << "  outputs";
  for (int32_t o : k.outputs()) os << " %" << o;
  os << "\n  run by steps";
  for (int s = 0; s < p.steps_size(); ++s) {
    if (p.steps(s).kernel() == k.name()) os << ' ' << s;
  }
  os << "\n";
  return os.str();
}

}  // namespace ampc::report
