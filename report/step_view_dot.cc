#include "report/step_view_dot.h"

#include "report/dot.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace ampc::report {
namespace {

std::string join(const std::vector<std::string>& parts, size_t count) {
  std::string s;
  for (size_t i = 0; i < count && i < parts.size(); ++i) s += "/" + parts[i];
  return s;
}

std::string last_segment(const std::string& name) {
  const size_t slash = name.find_last_of('/');
  return slash == std::string::npos ? name : name.substr(slash + 1);
}

// A drawn box: one node, or one collapsed scope of a phase.
struct Box {
  std::string id;
  std::string phase;
  std::string cluster;  // the kernel cluster (plan step) it sits in; empty: none
  std::vector<int> nodes;
  bool skip_step = false;  // a skip-step node inside a kernel of another phase
};

}  // namespace

const char* dtype_fill(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "fp64") return "#9ecae1";
  if (dtype == "fp16") return "#fdae6b";
  if (dtype == "bf16") return "#a1d99b";
  if (dtype == "bool") return "#d9d9d9";
  if (dtype.empty()) return "#ffffff";
  return "#bcbddc";  // integers
}

std::string step_view_dot(const StepView& view, const StepDotOptions& options) {
  const int depth = options.collapse_depth;
  std::vector<Box> boxes;
  std::vector<int> box_of(view.nodes.size(), -1);
  std::map<std::string, int> scope_box;  // phase + scope prefix -> box
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const ViewNode& n = view.nodes[i];
    if (depth > 0 && static_cast<int>(n.scope.size()) >= depth) {
      const std::string key = n.phase + "|" + join(n.scope, depth);
      auto [it, fresh] = scope_box.emplace(key, static_cast<int>(boxes.size()));
      if (fresh) boxes.push_back({"s" + std::to_string(boxes.size()), n.phase, "", {}});
      boxes[it->second].nodes.push_back(static_cast<int>(i));
      box_of[i] = it->second;
      continue;
    }
    box_of[i] = static_cast<int>(boxes.size());
    boxes.push_back({"n" + std::to_string(i),
                     n.phase,
                     n.kernel.empty() ? "" : n.kernel + " (step " + std::to_string(n.step) + ")",
                     {static_cast<int>(i)}});
  }
  // A kernel stays one cluster: it sits in the phase of its first member outside the
  // skip-step (the fused optimizer update holds its skip-step Wheres, drawn as a cluster
  // inside it).
  std::map<std::string, std::string> kernel_phase;
  for (const Box& b : boxes) {
    if (b.cluster.empty()) continue;
    auto [it, fresh] = kernel_phase.emplace(b.cluster, b.phase);
    if (!fresh && it->second == kPhaseSkipStep) it->second = b.phase;
  }
  for (Box& b : boxes) {
    if (b.cluster.empty()) continue;
    b.skip_step = b.phase == kPhaseSkipStep && kernel_phase[b.cluster] != kPhaseSkipStep;
    b.phase = kernel_phase[b.cluster];
  }
  const bool small = boxes.size() <= 300;  // edge labels only where they stay legible

  std::ostringstream os;
  os << "digraph " << dot_quote(view.title.empty() ? "step" : view.title) << " {\n"
     << "  rankdir=TB; compound=true; newrank=true;\n"
     << "  node [fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n"
     << "  label=" << dot_quote(view.title + " (" + view.precision + ")") << "; labelloc=t;\n";

  const std::map<std::string, std::string> phase_colour = {
      {kPhaseInputs, "#f7f7f7"},      {kPhaseForward, "#eef5fb"},   {kPhaseBackward, "#fbf1e8"},
      {kPhaseLossScaling, "#f3ecf8"}, {kPhaseOptimizer, "#edf7ec"}, {kPhaseSkipStep, "#fde0dd"},
      {kPhaseStatistics, "#f5f5f5"}};
  int cluster_id = 0;
  for (const std::string& phase : view_phases()) {
    std::map<std::string, std::vector<const Box*>> by_cluster;
    for (const Box& b : boxes)
      if (b.phase == phase) by_cluster[b.cluster].push_back(&b);
    if (by_cluster.empty()) continue;
    os << "  subgraph cluster_" << cluster_id++ << " {\n    label=" << dot_quote(phase)
       << "; style=filled; fillcolor=" << dot_quote(phase_colour.at(phase))
       << "; color=\"#888888\"; fontsize=14;\n";
    for (auto& [cluster, members] : by_cluster) {
      const bool kernel = !cluster.empty();
      if (kernel)
        os << "    subgraph cluster_" << cluster_id++ << " {\n      label=" << dot_quote(cluster)
           << "; style=\"dashed,rounded\"; color=\"#444444\"; fontsize=9;\n";
      // Skip-step nodes of a kernel last, in a cluster of their own inside it.
      std::stable_partition(members.begin(), members.end(),
                            [](const Box* b) { return !b->skip_step; });
      bool skip_cluster = false;
      for (const Box* b : members) {
        if (b->skip_step && !skip_cluster) {
          os << "      subgraph cluster_" << cluster_id++
             << " {\n        label=\"skip-step\"; style=filled; fillcolor=\"#fde0dd\"; "
                "color=\"#d62728\"; fontsize=9;\n";
          skip_cluster = true;
        }
        os << (kernel ? "      " : "    ") << b->id;
        if (b->nodes.size() == 1 && b->id[0] == 'n') {
          const ViewNode& n = view.nodes[b->nodes[0]];
          std::string label = n.op + "\n" + last_segment(n.name);
          if (!n.dtype.empty()) label += "\n" + n.dtype + (n.rule.empty() ? "" : ": " + n.rule);
          if (!n.change.empty()) label += "\n" + n.change;
          os << " [shape=box, style=\"rounded,filled" << (n.inserted_cast ? ",bold" : "")
             << "\", fillcolor=" << dot_quote(dtype_fill(n.dtype));
          if (n.inserted_cast) os << ", color=\"#d62728\", penwidth=3";
          os << ", label=" << dot_quote(label) << ", tooltip=" << dot_quote(n.name) << "];\n";
        } else {
          std::map<std::string, int> dtypes;
          int casts = 0;
          for (int i : b->nodes) {
            ++dtypes[view.nodes[i].dtype];
            casts += view.nodes[i].inserted_cast;
          }
          std::string major;
          int most = -1;
          for (const auto& [d, c] : dtypes)
            if (c > most) most = c, major = d;
          const ViewNode& first = view.nodes[b->nodes[0]];
          std::string label = join(first.scope, static_cast<size_t>(depth)) + "\n" +
                              std::to_string(b->nodes.size()) + " nodes";
          for (const auto& [d, c] : dtypes)
            if (!d.empty()) label += "\n" + d + ": " + std::to_string(c);
          if (casts) label += "\ninserted casts: " + std::to_string(casts);
          os << " [shape=box3d, style=filled, fillcolor=" << dot_quote(dtype_fill(major))
             << (casts ? ", color=\"#d62728\"" : "") << ", label=" << dot_quote(label) << "];\n";
        }
      }
      if (skip_cluster) os << "      }\n";
      if (kernel) os << "    }\n";
    }
    os << "  }\n";
  }

  // Edges: producer box -> reader box, once per pair (and per found_inf).
  std::vector<int> producer(view.tensors.size(), -1);
  for (size_t i = 0; i < view.nodes.size(); ++i)
    for (int t : view.nodes[i].outputs) producer[t] = box_of[i];
  std::set<std::pair<int, int>> drawn;
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    for (int t : view.nodes[i].inputs) {
      const int from = producer[t], to = box_of[i];
      if (from < 0 || from == to) continue;
      const ViewTensor& tensor = view.tensors[t];
      if (tensor.found_inf) {
        if (!drawn.insert({-1 - from, to}).second) continue;
        os << "  " << boxes[from].id << " -> " << boxes[to].id
           << " [color=\"#d62728\", penwidth=2, fontcolor=\"#d62728\", label=\"found_inf\"];\n";
        continue;
      }
      if (!drawn.insert({from, to}).second) continue;
      os << "  " << boxes[from].id << " -> " << boxes[to].id;
      if (small) os << " [label=" << dot_quote(tensor.type) << "]";
      os << ";\n";
    }
  }
  os << "  subgraph cluster_legend {\n    label=\"compute dtype\"; fontsize=10;\n";
  for (const char* d : {"fp32", "fp16", "bf16", "int64", "bool"})
    os << "    legend_" << d << " [shape=box, style=filled, fillcolor=" << dot_quote(dtype_fill(d))
       << ", label=" << dot_quote(d) << "];\n";
  os << "    legend_cast [shape=box, style=\"filled,bold\", color=\"#d62728\", penwidth=3, "
        "fillcolor=\"#fdae6b\", label=\"inserted cast\"];\n  }\n}\n";
  return os.str();
}

}  // namespace ampc::report
