// `ampc ops [--op NAME] [--format text|json]`: every operator ampc knows, one row each, with
// what each part of ampc has for it: the op table's facts (ops/op_info.h: pattern, autocast
// class, how it fuses, view and in-place flags), whether the CPU backend runs it, how the CUDA
// backend runs it (a hand-written kernel or library call, a generated kernel, a view) and
// whether autodiff has its gradient rule. The rows are the union of the registries' keys
// (ops/op_key.h), so an op that one part lacks shows where the gap is. An op the compiler
// rewrites into others (passes/rewritten_ops.h) shows where that stands in for a backend's op
// or a gradient rule: "lowered" (every target, before differentiation) and, on CUDA,
// "rewritten".
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "ops/op_info.h"
#include "passes/autodiff/gradient_registry.h"
#include "passes/rewritten_ops.h"
#include "runtime/cpu/op_registry.h"
#include "tools/ampc/commands.h"
#ifdef AMPC_HAVE_CUDA
#include "runtime/cuda/op_builders.h"
#endif

namespace ampc::cli {
namespace {

// Names of the op table's enumerators, in their order (ops/op_info.h).
constexpr const char* kPatternNames[] = {"opaque", "elementwise",   "rowwise", "reduction",
                                         "gemm",   "data movement", "view"};
constexpr const char* kPrecisionNames[] = {"follow", "allow", "deny", "keep"};
constexpr const char* kFusedNames[] = {"-",          "arith", "pow",       "variadic", "unary",
                                       "compare",    "not",   "logic",     "where",    "clip",
                                       "activation", "prelu", "predicate", "cast",     "identity"};
static_assert(std::size(kPatternNames) == static_cast<size_t>(ops::Pattern::kView) + 1);
static_assert(std::size(kPrecisionNames) == static_cast<size_t>(ops::Precision::kKeep) + 1);
static_assert(std::size(kFusedNames) == static_cast<size_t>(ops::FusedForm::kIdentity) + 1);

template <size_t N, typename E>
const char* name_of(const char* const (&names)[N], E e) {
  return names[static_cast<size_t>(e)];
}

// The domains of steps that only the compiler makes (the fused kernels): not a user's ops.
bool internal(const ops::OpKey& key) {
  return key.domain == "ampc.kernel";
}

std::set<ops::OpKey> all_keys() {
  std::set<ops::OpKey> keys;
  for (const ops::OpInfo& info : ops::all_op_infos()) keys.insert({info.domain, info.op});
  for (const ops::OpKey& k : rt::cpu::OpRegistry::instance().keys()) keys.insert(k);
  for (const ops::OpKey& k : passes::autodiff::GradientRegistry::instance().keys()) keys.insert(k);
  for (const passes::RewrittenOp& r : passes::rewritten_ops()) keys.insert({"", r.op});
#ifdef AMPC_HAVE_CUDA
  for (const ops::OpKey& k : rt::cuda::builder_keys()) keys.insert(k);
#endif
  std::erase_if(keys, internal);
  return keys;
}

// How the CUDA backend runs the op: "kernel" (a builder: hand-written kernel, cuBLASLt,
// cuDNN, NCCL), "generated" (inside a fused kernel only), "view" (no kernel), "-" (the plan is
// refused on the device, naming the op), "n/a" (this ampc was built without CUDA).
std::string cuda_support(const ops::OpKey& key, const ops::OpInfo& info) {
#ifdef AMPC_HAVE_CUDA
  if (info.is_view()) return "view";
  if (rt::cuda::find_builder(key.domain, key.op)) return "kernel";
  return info.fused != ops::FusedForm::kNone ? "generated" : "-";
#else
  (void)key;
  (void)info;
  return "n/a";
#endif
}

nlohmann::json row(const ops::OpKey& key) {
  const ops::OpInfo& info = ops::op_info(key.domain, key.op);
  nlohmann::json j;
  j["domain"] = key.domain;
  j["op"] = key.op;
  j["pattern"] = name_of(kPatternNames, info.pattern);
  // Autocast classes ops of the default domain only; the ampc domain's ops are the compiler's.
  j["autocast"] = key.domain.empty() ? name_of(kPrecisionNames, info.precision) : "-";
  j["fused"] = name_of(kFusedNames, info.fused);
  j["in_place"] = info.in_place;
  const passes::RewrittenOp* rw = key.domain.empty() ? passes::find_rewritten_op(key.op) : nullptr;
  const bool lowered = rw && !rw->cuda_only;
  const bool cpu_op = rt::cpu::OpRegistry::instance().find(key.op, key.domain) != nullptr;
  const bool rule = passes::autodiff::GradientRegistry::instance().find(key) != nullptr;
  j["cpu"] = cpu_op || lowered;
  j["cuda"] = cuda_support(key, info);
  if (rw && j["cuda"] == "-") j["cuda"] = "rewritten";
  j["gradient"] = rule || lowered;
  // The pass that rewrites the op, when one does (null otherwise); "cpu" and "gradient" then
  // count what runs and is differentiated in its place.
  j["rewritten_by"] = rw ? nlohmann::json(rw->pass) : nlohmann::json(nullptr);
  j["cpu_via"] = cpu_op ? "op" : (lowered ? "lowering" : "-");
  j["gradient_via"] = rule ? "rule" : (lowered ? "lowering" : "-");
  return j;
}

// "yes" for the part's own support (`own`), "lowered" where a rewrite stands in, else "-".
std::string cell(const nlohmann::json& via, const char* own) {
  if (via == own) return "yes";
  return via == "lowering" ? "lowered" : "-";
}

void print_text(const nlohmann::json& rows) {
  std::cout << std::left << std::setw(34) << "op" << std::setw(15) << "pattern" << std::setw(10)
            << "autocast" << std::setw(22) << "fused" << std::setw(8) << "cpu" << std::setw(11)
            << "cuda"
            << "gradient\n";
  int cpu = 0, cuda = 0, grad = 0;
  for (const auto& r : rows) {
    const std::string name =
        r["domain"].get<std::string>().empty()
            ? r["op"].get<std::string>()
            : r["domain"].get<std::string>() + "." + r["op"].get<std::string>();
    const std::string fused = r["fused"].get<std::string>() + (r["in_place"] ? ", in place" : "");
    std::cout << std::setw(34) << name << std::setw(15) << r["pattern"].get<std::string>()
              << std::setw(10) << r["autocast"].get<std::string>() << std::setw(22) << fused
              << std::setw(8) << cell(r["cpu_via"], "op") << std::setw(11)
              << r["cuda"].get<std::string>() << cell(r["gradient_via"], "rule") << '\n';
    cpu += r["cpu"].get<bool>();
    cuda += r["cuda"] != "-" && r["cuda"] != "n/a";
    grad += r["gradient"].get<bool>();
  }
  if (rows.size() > 1) {
    std::cout << rows.size() << " operators: the CPU backend runs " << cpu << ", the CUDA backend "
              << cuda << ", autodiff differentiates " << grad << " (\"lowered\": as the ops a "
              << "compile-time rewrite makes of it)\n";
  }
}

struct OpsArgs {
  std::string op;
  std::string format = "text";
};

void run_ops(const OpsArgs& args) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ops::OpKey& key : all_keys()) {
    if (!args.op.empty() && key.str() != args.op && key.op != args.op) continue;
    rows.push_back(row(key));
  }
  if (rows.empty()) throw Error("no operator '" + args.op + "': `ampc ops` lists them all");
  if (args.format == "json") {
    std::cout << rows.dump(2) << '\n';
  } else {
    print_text(rows);
  }
}

}  // namespace

void add_ops_command(CLI::App& app) {
  auto args = std::make_shared<OpsArgs>();
  auto* cmd = app.add_subcommand(
      "ops",
      "Every operator: its facts, and whether the CPU backend, the CUDA backend and "
      "autodiff support it");
  cmd->add_option("--op", args->op, "Only this operator (Relu, or with its domain: ampc.Conv)");
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([args] { run_ops(*args); });
}

}  // namespace ampc::cli
