#include "report/dot.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/error.h"
#include "base/file_util.h"

namespace ampc::report {
namespace {

// One colour per class of element type; the legend repeats this table.
struct ColourClass {
  const char* label;
  const char* fill;
};

ColourClass colour_class(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat64:
      return {"fp32", "#9ecae1"};
    case DType::kFloat16:
      return {"fp16", "#fdae6b"};
    case DType::kBFloat16:
      return {"bf16", "#a1d99b"};
    case DType::kBool:
      return {"bool", "#d9d9d9"};
    case DType::kUndefined:
      return {"unknown", "#ffffff"};
    default:
      return is_integer(t) ? ColourClass{"integer", "#bcbddc"} : ColourClass{"other", "#ffffff"};
  }
}

// A DOT string literal; a newline in `s` becomes DOT's line break escape.

// The element type a node "runs in": its first float output, else its first output.
DType node_dtype(const ir::Node& n) {
  DType first = DType::kUndefined;
  for (const ir::Value* v : n.outputs) {
    if (!v) continue;
    if (is_float(v->type.dtype)) return v->type.dtype;
    if (first == DType::kUndefined) first = v->type.dtype;
  }
  return first;
}

}  // namespace

std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

std::string to_dot(const ir::Model& model) {
  const ir::Graph& g = *model.graph;
  std::ostringstream os;
  os << "digraph " << dot_quote(g.name.empty() ? "model" : g.name) << " {\n"
     << "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  std::map<const ir::Value*, std::string> source;  // value -> dot node that provides it
  int next_id = 0;
  for (const ir::Value* v : g.inputs) {
    if (v->is_initializer()) continue;
    const std::string id = "in" + std::to_string(next_id++);
    source[v] = id;
    os << "  " << id
       << " [shape=ellipse, style=filled, fillcolor=" << dot_quote(colour_class(v->type.dtype).fill)
       << ", label=" << dot_quote(v->name + "\n" + v->type.str()) << "];\n";
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = *g.nodes[i];
    const std::string id = "n" + std::to_string(i);
    std::string weights;
    for (const ir::Value* v : n.inputs) {
      if (v && v->is_initializer()) weights += "\n" + v->name + " " + v->type.str();
    }
    const ColourClass cc = colour_class(node_dtype(n));
    os << "  " << id << " [shape=box, style=\"rounded,filled\", fillcolor=" << dot_quote(cc.fill)
       << ", label=" << dot_quote(n.op_type + (n.name.empty() ? "" : "\n" + n.name) + weights)
       << ", tooltip=" << dot_quote(cc.label) << "];\n";
    for (const ir::Value* v : n.inputs) {
      if (!v) continue;
      auto it = source.find(v);
      if (it == source.end()) continue;  // initializers are listed inside the node
      os << "  " << it->second << " -> " << id << " [label=" << dot_quote(v->type.str()) << "];\n";
    }
    for (const ir::Value* v : n.outputs) {
      if (v) source[v] = id;
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const ir::Value* v = g.outputs[i];
    const std::string id = "out" + std::to_string(i);
    os << "  " << id
       << " [shape=ellipse, style=filled, fillcolor=" << dot_quote(colour_class(v->type.dtype).fill)
       << ", label=" << dot_quote(v->name + "\n" + v->type.str()) << "];\n";
    if (auto it = source.find(v); it != source.end())
      os << "  " << it->second << " -> " << id << ";\n";
  }
  os << "  subgraph cluster_legend {\n    label=\"element type\"; fontsize=10;\n";
  const DType legend[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt64,
                          DType::kBool};
  for (DType t : legend) {
    const ColourClass cc = colour_class(t);
    os << "    legend_" << cc.label << " [shape=box, style=filled, fillcolor=" << dot_quote(cc.fill)
       << ", label=" << dot_quote(cc.label) << "];\n";
  }
  os << "  }\n}\n";
  return os.str();
}

void write_svg(const std::string& dot_text, const std::string& path) {
  const std::string tmp = temp_path_beside(path);
  const std::string command = "dot -Tsvg -o '" + tmp + "' 2>/dev/null";
  if (path.find('\'') != std::string::npos)
    throw Error("--svg: file names with quotes are not supported");
  FILE* pipe = ::popen(command.c_str(), "w");
  if (!pipe) throw Error("cannot run Graphviz 'dot'");
  std::fwrite(dot_text.data(), 1, dot_text.size(), pipe);
  const int status = ::pclose(pipe);
  if (status != 0) {
    std::filesystem::remove(tmp);
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    throw Error(missing ? "--svg needs Graphviz's 'dot' program (Debian package graphviz)"
                        : "Graphviz 'dot' failed to render the graph");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace ampc::report
