#include "passes/lost_padding_rows.h"

#include <optional>
#include <set>

#include "base/dtype.h"

namespace ampc::passes {
namespace {

// Whether element k of a float tensor's bytes is zero of either sign (little-endian: every
// byte zero but the top one's sign bit).
bool is_zero(const ir::Tensor& t, int64_t k) {
  const size_t size = dtype_size(t.dtype);
  const uint8_t* e = t.bytes.data() + static_cast<size_t>(k) * size;
  for (size_t b = 0; b + 1 < size; ++b) {
    if (e[b] != 0) return false;
  }
  return (e[size - 1] & 0x7f) == 0;
}

// The only all-zero row of a 2-D table with at least two rows; nothing when there is none,
// several, or the data is missing.
std::optional<int64_t> only_zero_row(const ir::Tensor& t) {
  if (t.dims.size() != 2 || t.dims[0] < 2 || t.dims[1] < 1 ||
      t.bytes.size() != static_cast<size_t>(t.numel()) * dtype_size(t.dtype))
    return std::nullopt;
  std::optional<int64_t> found;
  for (int64_t r = 0; r < t.dims[0]; ++r) {
    bool zero = true;
    for (int64_t c = 0; c < t.dims[1] && zero; ++c) zero = is_zero(t, r * t.dims[1] + c);
    if (!zero) continue;
    if (found) return std::nullopt;
    found = r;
  }
  return found;
}

// Whether `n` looks rows of its table up by run-time indices: a Gather along axis 0 whose
// indices are not a constant.
bool looks_up_rows(const ir::Node& n) {
  if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 || !n.inputs[1] ||
      n.inputs[1]->is_initializer())
    return false;
  const ir::Attribute* axis = n.attr("axis");
  return !axis || axis->i == 0 || axis->i == -2;
}

// Whether `v` is computed from `indices`, looking at most `depth` producers back.
bool computed_from(const ir::Value* v, const ir::Value* indices, int depth) {
  if (v == indices) return true;
  if (!v || !v->producer || depth == 0) return false;
  for (const ir::Value* in : v->producer->inputs) {
    if (computed_from(in, indices, depth - 1)) return true;
  }
  return false;
}

// Whether every reader of the lookup masks it by its own indices (a Mul or a Where with
// another operand computed from them, as `emb(t) * (t != p).unsqueeze(-1)` or
// `emb(t).masked_fill((t == p).unsqueeze(-1), 0)`): the model's own padding mask, which
// gives row p no gradient.
bool masked_by_its_indices(const ir::Node& gather) {
  const ir::Value* out = gather.outputs.empty() ? nullptr : gather.outputs[0];
  if (!out || out->uses.empty()) return false;
  constexpr int kDepth = 6;  // Equal, Not, Cast, Unsqueeze, Expand and one more
  for (const ir::Use& u : out->uses) {
    const ir::Node& r = *u.node;
    if (!r.domain.empty() || (r.op_type != "Mul" && r.op_type != "Where")) return false;
    bool masked = false;
    for (const ir::Value* in : r.inputs) {
      masked |= in != out && computed_from(in, gather.inputs[1], kDepth);
    }
    if (!masked) return false;
  }
  return true;
}

std::string describe(const ir::Node& gather, const std::string& table, int64_t row) {
  const std::string p = std::to_string(row);
  return "node " + gather.label() + ": row " + p + " of '" + table +
         "' is all zeros, as nn.Embedding(padding_idx=" + p +
         ") starts its padding row, but torch.onnx.export drops padding_idx (it only warns), "
         "so this file trains row " +
         p +
         " where PyTorch would not; export with ampc.export (Python), which keeps it, or mask "
         "the lookups in the model (emb(tokens) * (tokens != " +
         p + ").unsqueeze(-1))";
}

}  // namespace

std::vector<std::string> lost_padding_row_warnings(const ir::Model& model,
                                                   const AutodiffOptions& options) {
  if (model.producer_name != "pytorch" || !model.graph || !model.state_updates.empty()) return {};
  for (const auto& [key, value] : model.metadata) {
    if (key == kStopGradientKey) return {};  // ampc's exporter: padding_idx kept
  }
  const std::vector<ir::Value*> trained = trainable_parameters(model, options);
  const std::set<const ir::Value*> tables(trained.begin(), trained.end());
  std::set<const ir::Value*> said;
  std::vector<std::string> lines;
  for (const auto& n : model.graph->nodes) {
    if (!looks_up_rows(*n)) continue;
    const ir::Value* table = n->inputs[0];
    if (!tables.count(table) || said.count(table) || masked_by_its_indices(*n)) continue;
    said.insert(table);
    if (const auto row = only_zero_row(*table->initializer))
      lines.push_back(describe(*n, table->name, *row));
  }
  return lines;
}

}  // namespace ampc::passes
