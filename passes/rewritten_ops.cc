#include "passes/rewritten_ops.h"

#include <algorithm>

namespace ampc::passes {

const std::vector<RewrittenOp>& rewritten_ops() {
  static const std::vector<RewrittenOp> rows = {
      // Every target, before autodiff.
      {"Resize", "lower_resize", false},
      {"GridSample", "lower_grid_sample", false},
      {"Einsum", "lower_einsum", false},
      {"LSTM", "recurrent_lowering", false},
      {"GRU", "recurrent_lowering", false},
      {"RNN", "recurrent_lowering", false},
      // CUDA targets: into the ops the CUDA backend runs.
      {"GatherElements", "index_ops_for_cuda", true},
      {"ScatterElements", "index_ops_for_cuda", true},
      {"GatherND", "index_ops_for_cuda", true},
      {"OneHot", "index_ops_for_cuda", true},
      {"Trilu", "index_ops_for_cuda", true},
      {"Tile", "index_ops_for_cuda", true},
      {"ArgMax", "reductions_for_cuda", true},
      {"ArgMin", "reductions_for_cuda", true},
      {"TopK", "reductions_for_cuda", true},
      {"ReduceLogSumExp", "reductions_for_cuda", true},
      {"CumSum", "reductions_for_cuda", true},
  };
  return rows;
}

const RewrittenOp* find_rewritten_op(std::string_view op) {
  const auto& rows = rewritten_ops();
  auto it =
      std::find_if(rows.begin(), rows.end(), [op](const RewrittenOp& r) { return r.op == op; });
  return it == rows.end() ? nullptr : &*it;
}

}  // namespace ampc::passes
