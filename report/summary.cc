#include "report/summary.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "passes/autodiff/autodiff.h"
#include "passes/buffer_updates.h"
#include "passes/model_metadata.h"

namespace ampc::report {
namespace {

struct Counts {
  std::map<std::string, int64_t> ops;  // sorted by op type
  int64_t nodes = 0;
  int64_t subgraphs = -1;  // the main graph is not a subgraph
  int64_t init_count = 0;
  int64_t init_bytes = 0;
};

Counts count(const ir::Model& model) {
  Counts c;
  model.graph->for_each_graph([&c](const ir::Graph& g) {
    ++c.subgraphs;
    for (const auto& n : g.nodes) {
      ++c.ops[n->domain.empty() ? n->op_type : n->domain + "." + n->op_type];
      ++c.nodes;
    }
    for (const ir::Value* v : g.initializers) {
      ++c.init_count;
      c.init_bytes += static_cast<int64_t>(v->initializer->byte_size());
    }
  });
  return c;
}

nlohmann::ordered_json value_json(const ir::Value& v) {
  nlohmann::ordered_json j;
  j["name"] = v.name;
  j["dtype"] = dtype_name(v.type.dtype);
  j["shape"] =
      v.type.shape ? nlohmann::ordered_json(*v.type.shape) : nlohmann::ordered_json(nullptr);
  return j;
}

std::string human_bytes(int64_t b) {
  std::ostringstream os;
  if (b < 1024) {
    os << b << " B";
  } else if (b < 1024 * 1024) {
    os << std::fixed << std::setprecision(1) << b / 1024.0 << " KiB";
  } else {
    os << std::fixed << std::setprecision(1) << b / (1024.0 * 1024.0) << " MiB";
  }
  return os.str();
}

// What ampc's own metadata keys list, one name per line (written by ampc.export).
const std::map<std::string, std::string>& known_metadata() {
  static const std::map<std::string, std::string> known = {
      {passes::kBufferUpdatesKey, "buffers the forward writes, updated each step"},
      {passes::kStopGradientKey, "values where PyTorch's autograd stops"},
      {passes::kUntrainedKey, "initializers torch.optim does not train"}};
  return known;
}

// "KEY: N names (what they are)" for ampc's keys, "KEY: VALUE" (shortened) for others.
std::string metadata_line(const std::string& key, const std::string& value) {
  auto it = known_metadata().find(key);
  if (it == known_metadata().end()) {
    const size_t cut = std::min(value.find('\n'), size_t{60});
    return key + ": " + value.substr(0, cut) + (cut < value.size() ? "..." : "");
  }
  const size_t names = passes::value_lines(value).size();
  return key + ": " + std::to_string(names) + (names == 1 ? " name (" : " names (") + it->second +
         ")";
}

}  // namespace

nlohmann::ordered_json model_summary_json(const ir::Model& model) {
  const Counts c = count(model);
  nlohmann::ordered_json j;
  j["inputs"] = nlohmann::ordered_json::array();
  for (const ir::Value* v : model.graph->inputs) {
    if (!v->is_initializer()) j["inputs"].push_back(value_json(*v));
  }
  j["outputs"] = nlohmann::ordered_json::array();
  for (const ir::Value* v : model.graph->outputs) j["outputs"].push_back(value_json(*v));
  j["initializers"] = {{"count", c.init_count}, {"bytes", c.init_bytes}};
  j["ops"] = nlohmann::ordered_json::object();
  for (const auto& [op, n] : c.ops) j["ops"][op] = n;
  j["opsets"] = nlohmann::ordered_json::object();
  for (const auto& o : model.opsets)
    j["opsets"][o.domain.empty() ? "ai.onnx" : o.domain] = o.version;
  j["nodes"] = c.nodes;
  j["subgraphs"] = c.subgraphs;
  j["ir_version"] = model.ir_version;
  j["producer"] =
      model.producer_name + (model.producer_version.empty() ? "" : " " + model.producer_version);
  j["metadata"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : model.metadata) j["metadata"][key] = value;
  return j;
}

std::string model_summary_text(const ir::Model& model, const std::string& title) {
  const Counts c = count(model);
  std::ostringstream os;
  os << title << "\n";
  os << "  producer      " << model.producer_name << ' ' << model.producer_version
     << ", IR version " << model.ir_version << "\n  opsets        ";
  for (size_t i = 0; i < model.opsets.size(); ++i) {
    os << (i ? ", " : "") << (model.opsets[i].domain.empty() ? "ai.onnx" : model.opsets[i].domain)
       << ' ' << model.opsets[i].version;
  }
  os << "\n  nodes         " << c.nodes;
  if (c.subgraphs > 0) os << " (in " << c.subgraphs + 1 << " graphs)";
  os << "\n  initializers  " << c.init_count << ", " << human_bytes(c.init_bytes);
  for (size_t i = 0; i < model.metadata.size(); ++i) {
    os << (i ? "\n                " : "\n  metadata      ")
       << metadata_line(model.metadata[i].first, model.metadata[i].second);
  }
  os << "\n\n";
  os << "inputs\n";
  for (const ir::Value* v : model.graph->inputs) {
    if (!v->is_initializer())
      os << "  " << std::left << std::setw(24) << v->name << ' ' << v->type.str() << '\n';
  }
  os << "outputs\n";
  for (const ir::Value* v : model.graph->outputs) {
    os << "  " << std::left << std::setw(24) << v->name << ' ' << v->type.str() << '\n';
  }
  os << "ops\n";
  for (const auto& [op, n] : c.ops)
    os << "  " << std::left << std::setw(28) << op << std::right << std::setw(6) << n << '\n';
  return os.str();
}

}  // namespace ampc::report
