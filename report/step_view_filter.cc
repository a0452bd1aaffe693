#include "report/step_view_filter.h"

#include <deque>
#include <map>
#include <set>

#include "base/error.h"

namespace ampc::report {
namespace {

StepView keep_nodes(const StepView& view, const std::vector<bool>& keep) {
  StepView out;
  out.title = view.title;
  out.precision = view.precision;
  out.origin = view.origin;
  out.tensors = view.tensors;
  for (size_t i = 0; i < view.nodes.size(); ++i)
    if (keep[i]) out.nodes.push_back(view.nodes[i]);
  return out;
}

}  // namespace

StepView focus_view(const StepView& view, const std::string& what) {
  std::vector<bool> keep(view.nodes.size(), false);
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    const ViewNode& n = view.nodes[i];
    if (what == "amp") {
      keep[i] = n.phase == kPhaseLossScaling || n.phase == kPhaseSkipStep || n.inserted_cast;
    } else if (what == "optimizer") {
      keep[i] = n.phase == kPhaseOptimizer || n.phase == kPhaseSkipStep;
    } else if (what == "forward" || what == "backward") {
      keep[i] = n.phase == what;
    } else {
      throw Error("--focus: '" + what + "' is not one of amp, forward, backward, optimizer");
    }
  }
  return keep_nodes(view, keep);
}

StepView around_view(const StepView& view, const std::string& node, int depth) {
  if (depth < 0) throw Error("--depth must be 0 or more");
  // Who produces and who reads each tensor.
  std::vector<std::vector<int>> users(view.tensors.size()), producers(view.tensors.size());
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    for (int t : view.nodes[i].inputs) users[t].push_back(static_cast<int>(i));
    for (int t : view.nodes[i].outputs) producers[t].push_back(static_cast<int>(i));
  }
  std::vector<int> dist(view.nodes.size(), -1);
  std::deque<int> queue;
  for (size_t i = 0; i < view.nodes.size(); ++i) {
    if (view.nodes[i].name == node) {
      dist[i] = 0;
      queue.push_back(static_cast<int>(i));
    }
  }
  if (queue.empty()) {
    for (size_t t = 0; t < view.tensors.size(); ++t) {
      if (view.tensors[t].name != node) continue;
      for (const auto* list : {&producers[t], &users[t]})
        for (int i : *list)
          if (dist[i] < 0) dist[i] = 0, queue.push_back(i);
    }
  }
  if (queue.empty()) throw Error("--around: no node or tensor '" + node + "' in the step");
  while (!queue.empty()) {
    const int i = queue.front();
    queue.pop_front();
    if (dist[i] == depth) continue;
    auto visit = [&](int j) {
      if (dist[j] < 0) dist[j] = dist[i] + 1, queue.push_back(j);
    };
    for (int t : view.nodes[i].inputs)
      for (int j : producers[t]) visit(j);
    for (int t : view.nodes[i].outputs)
      for (int j : users[t]) visit(j);
  }
  std::vector<bool> keep(view.nodes.size());
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = dist[i] >= 0;
  return keep_nodes(view, keep);
}

StepView autocast_diff_view(const StepView& before, const StepView& after) {
  std::map<std::string, const ViewNode*> old_nodes;
  for (const auto& n : before.nodes) old_nodes[n.name] = &n;
  std::vector<bool> keep(after.nodes.size(), false);
  std::vector<std::string> change(after.nodes.size());
  for (size_t i = 0; i < after.nodes.size(); ++i) {
    const ViewNode& n = after.nodes[i];
    auto it = old_nodes.find(n.name);
    if (n.inserted_cast) {
      const std::string from = n.inputs.empty() ? "?" : after.tensors[n.inputs[0]].dtype;
      change[i] = "inserted cast " + from + " -> " + n.dtype;
    } else if (it == old_nodes.end()) {
      continue;  // loss scaling and the skip-step are AMP's, not autocast's; renumbered nodes
    } else if (it->second->dtype != n.dtype) {
      change[i] = it->second->dtype + " -> " + n.dtype;
    } else {
      continue;
    }
    keep[i] = true;
  }
  StepView out = keep_nodes(after, keep);
  size_t k = 0;
  for (size_t i = 0; i < after.nodes.size(); ++i)
    if (keep[i]) out.nodes[k++].change = change[i];
  out.title = after.title + " (what autocast changed)";
  return out;
}

}  // namespace ampc::report
