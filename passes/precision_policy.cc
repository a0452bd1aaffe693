#include "passes/precision_policy.h"

#include <fnmatch.h>

#include <onnx/defs/schema.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace ampc::passes {
namespace {

OpClass parse_class(const std::string& key) {
  if (key == "allow") return OpClass::kAllow;
  if (key == "deny") return OpClass::kDeny;
  return OpClass::kFollow;
}

// The overrides of a --policy file: {"allow": [...], "deny": [...], "follow": [...],
// "keep_fp32": [...]}, every key optional.
void read_policy_file(const std::string& path, AutocastOptions& out) {
  std::ifstream in(path);
  if (!in) throw Error("--policy '" + path + "': cannot open the file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("--policy '" + path + "': not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error("--policy '" + path + "': expected a JSON object");
  const std::map<std::string, std::vector<std::string>*> keys = {{"allow", &out.allow},
                                                                 {"deny", &out.deny},
                                                                 {"follow", &out.follow},
                                                                 {"keep_fp32", &out.keep_fp32}};
  for (const auto& [key, value] : j.items()) {
    auto it = keys.find(key);
    if (it == keys.end()) {
      throw Error("--policy '" + path + "': unknown key '" + key +
                  "' (expected allow, deny, follow, keep_fp32)");
    }
    if (!value.is_array()) throw Error("--policy '" + path + "': '" + key + "' must be a list");
    for (const auto& item : value) {
      if (!item.is_string()) {
        throw Error("--policy '" + path + "': '" + key + "' must be a list of strings");
      }
      it->second->push_back(item.get<std::string>());
    }
  }
}

}  // namespace

std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kAllow:
      return "ALLOW";
    case OpClass::kDeny:
      return "DENY";
    case OpClass::kFollow:
      return "FOLLOW";
    case OpClass::kKeep:
      return "KEEP";
  }
  return "?";
}

// The default policy (amp-semantics.md section 2): the ops' precision class in the op table
// (ops/op_table.cc); every op of the default domain without one is FOLLOW.
OpClass PrecisionPolicy::table_class(const std::string& op_type) {
  return ops::op_info("", op_type).precision;
}

PrecisionPolicy::PrecisionPolicy(const AutocastOptions& options) {
  AutocastOptions merged;
  if (!options.policy_file.empty()) read_policy_file(options.policy_file, merged);
  const struct {
    const char* flag;
    const std::vector<std::string>& from_file;
    const std::vector<std::string>& from_cli;
  } lists[] = {{"allow", merged.allow, options.allow},
               {"deny", merged.deny, options.deny},
               {"follow", merged.follow, options.follow}};
  for (const auto& l : lists) {
    for (const auto* ops : {&l.from_file, &l.from_cli}) {
      const bool file = ops == &l.from_file;
      for (const std::string& op : *ops) {
        const std::string source =
            file ? "policy file '" + std::string(l.flag) + "'" : "--" + std::string(l.flag);
        if (!onnx::OpSchemaRegistry::Schema(op, onnx::ONNX_DOMAIN)) {
          throw Error(source + " " + op + ": '" + op +
                      "' is not an operator of the default ONNX domain");
        }
        if (op == "Cast") throw Error(source + " Cast: explicit Casts are never re-typed");
        const OpClass c = parse_class(l.flag);
        auto it = overrides_.find(op);
        if (it != overrides_.end() && it->second.op_class != c) {
          throw Error("op '" + op + "' is moved to both " +
                      std::string(op_class_name(it->second.op_class)) + " and " +
                      std::string(op_class_name(c)));
        }
        overrides_[op] = {c, std::string(op_class_name(c)) + " (" + source + " " + op + ")"};
      }
    }
  }
  keep_fp32_ = merged.keep_fp32;
  keep_fp32_.insert(keep_fp32_.end(), options.keep_fp32.begin(), options.keep_fp32.end());
}

PolicyDecision PrecisionPolicy::classify(const ir::Node& node) const {
  if (!node.domain.empty() && node.domain != "ai.onnx")
    return {OpClass::kKeep, "KEEP (domain " + node.domain + ")"};
  for (const auto& a : node.attributes) {
    if (a.g || !a.graphs.empty()) return {OpClass::kKeep, "KEEP (has subgraphs)"};
  }
  if (node.op_type == "Cast") return {OpClass::kKeep, "KEEP (explicit Cast)"};
  for (const std::string& p : keep_fp32_) {
    if (!node.name.empty() && fnmatch(p.c_str(), node.name.c_str(), 0) == 0)
      return {OpClass::kDeny, "fp32 (--keep-fp32 '" + p + "')"};
  }
  for (const std::string& p : autocast_disabled_) {
    if (!node.name.empty() && fnmatch(p.c_str(), node.name.c_str(), 0) == 0)
      return {OpClass::kDeny, "fp32 (torch.autocast(enabled=False) in the forward: '" + p + "')"};
  }
  for (const auto& l : lowerings_) {
    if (node.name.starts_with(l.node_prefix))
      return {OpClass::kDeny, "fp32 (lowered " + l.op + ", fp32 in PyTorch's autocast)"};
  }
  if (auto it = overrides_.find(node.op_type); it != overrides_.end()) return it->second;
  const OpClass c = table_class(node.op_type);
  return {c, std::string(op_class_name(c)) + " (table)"};
}

}  // namespace ampc::passes
