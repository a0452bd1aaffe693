// The generic row op (kernels/shared/row_ops.h) of a row-wise step and its scalar arguments,
// read by the CPU op (runtime/cpu/ops/row_ops.cc) and the CUDA step builder alike. A kind of
// the AMPC_ROW_OPS list is the RowwiseParams kind of the same name, so the mapping below is
// generated from the list and a spec without its plan kind does not compile.
#pragma once

#include <optional>

#include "kernels/shared/row_ops.h"
#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// nullopt for the kinds with kernels of their own (Softmax, LayerNormalization, ...).
inline std::optional<kernels::shared::RowOp> row_op_of(RowwiseParams::Kind kind) {
  switch (kind) {
#define AMPC_ROW_OP_KIND(NAME, SPEC) \
  case RowwiseParams::NAME:          \
    return kernels::shared::RowOp::NAME;
    AMPC_ROW_OPS(AMPC_ROW_OP_KIND)
#undef AMPC_ROW_OP_KIND
    default:
      return std::nullopt;
  }
}

inline kernels::shared::RowArgs row_args(const RowwiseParams& p) {
  return {p.epsilon(), p.p()};
}

}  // namespace ampc::plan
