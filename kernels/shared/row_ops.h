// The generic row-wise ops: each is a spec (its per-row math, written once, host and device),
// and one list, AMPC_ROW_OPS, from which the CUDA kernel (kernels/cuda/row_op.cu), its twin
// (kernels/twin/row_op.cc, the CPU op's implementation), the CPU op (runtime/cpu/ops/row_ops.cc)
// and the CUDA step builder (runtime/cuda/ops_nn.cc) are instantiated. Adding such an op is its
// plan kind, its legalize filler, its spec here, its op-table row and its gradient rule
// (docs/adding-an-op.md). Softmax, LayerNormalization and the cross-entropy keep kernels of
// their own (tuned row caches, several outputs, per-column operands).
//
// A spec describes, for one row x[0..n) of the op's axis:
//   kPasses reductions, one after the other: pass k folds term(k, x[j], stats, args) with
//   combine(k, ., .) from init<M>(k), over the kernels' partition and tree (rowwise_tree.h;
//   a row along the last axis) or in order (a column of an inner axis, one thread each), then
//   stats[k] = finish(k, total, n, args), which the later passes and the output may read;
//   the output y[j] = value(x[j], stats, per_row, args), rounded once to the element type,
//   where per_row holds the row's entries of the op's kRowOperands per-channel operands
//   (inputs 1.. of the op: row r of the outer * inner rows reads entry r % channels).
// M is the compute type: float (f32, f16, bf16 storage; the device) or double (the CPU op's f64).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/shared/hd.h"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_fp.h"

namespace ampc::kernels::shared {

// The scalar attributes a row op may read (the plan's RowwiseParams).
struct RowArgs {
  float epsilon = 0.0f;
  int32_t p = 2;  // LpNormalization: the norm's order, 1 or 2
};

// The per-channel operands of a row op (InstanceNormalization's scale and bias): `channels`
// values each, of one element type (f32, f16, bf16; f64 with an f64 input on the host).
constexpr int kMaxRowOperands = 2;
struct RowOperands {
  const void* data[kMaxRowOperands] = {nullptr, nullptr};
  DType dtype = DType::kFloat32;
  int64_t channels = 1;
};

template <typename M>
AMPC_HD M abs_of(M x) {
  return x < M(0) ? -x : x;  // -0 stays -0: it adds to a sum of magnitudes as +0
}

// LpNormalization: y = x / ||x||_p along one axis (p = 1: sum |x|; p = 2: sqrt(sum x^2)).
// A zero row gives 0 / 0 = NaN, as the ONNX definition does.
struct LpNormSpec {
  static constexpr const char* kOp = "LpNormalization";
  static constexpr int kPasses = 1;
  static constexpr int kRowOperands = 0;
  template <typename M>
  AMPC_HD static M init(int) {
    return M(0);
  }
  template <typename M>
  AMPC_HD static M term(int, M x, const M*, const RowArgs& a) {
    return a.p == 1 ? abs_of(x) : mul(x, x);
  }
  template <typename M>
  AMPC_HD static M combine(int, M acc, M t) {
    return add(acc, t);
  }
  template <typename M>
  AMPC_HD static M finish(int, M total, int64_t, const RowArgs& a) {
    return a.p == 1 ? total : sqrt_rn(total);
  }
  template <typename M>
  AMPC_HD static M value(M x, const M* stats, const M*, const RowArgs&) {
    return div(x, stats[0]);
  }
};

// InstanceNormalization (torch's InstanceNorm and GroupNorm export through it): rows are the
// (n, c) planes; the mean, then the biased variance around it, then (x - mean) * inv_std *
// scale[c] + bias[c]: LayerNormalization's math (rowwise.h), with the scale and bias per row.
struct InstanceNormSpec {
  static constexpr const char* kOp = "InstanceNormalization";
  static constexpr int kPasses = 2;
  static constexpr int kRowOperands = 2;  // scale, bias
  template <typename M>
  AMPC_HD static M init(int) {
    return M(0);
  }
  template <typename M>
  AMPC_HD static M term(int pass, M x, const M* stats, const RowArgs&) {
    if (pass == 0) return x;
    const M d = sub(x, stats[0]);
    return mul(d, d);
  }
  template <typename M>
  AMPC_HD static M combine(int, M acc, M t) {
    return add(acc, t);
  }
  template <typename M>
  AMPC_HD static M finish(int pass, M total, int64_t n, const RowArgs& a) {
    return pass == 0 ? mean_of(total, n) : inv_std_of(total, n, static_cast<M>(a.epsilon));
  }
  template <typename M>
  AMPC_HD static M value(M x, const M* stats, const M* per_row, const RowArgs&) {
    return layer_norm_value(x, stats[0], stats[1], &per_row[0], &per_row[1]);
  }
};

// X(NAME, SPEC): NAME is also the op's plan.proto RowwiseParams kind.
#define AMPC_ROW_OPS(X) X(LP_NORM, LpNormSpec) X(INSTANCE_NORM, InstanceNormSpec)

#define AMPC_ROW_OP_CHECK(NAME, SPEC)                  \
  static_assert(SPEC::kRowOperands <= kMaxRowOperands, \
                #SPEC " has more per-channel operands than RowOperands holds");
AMPC_ROW_OPS(AMPC_ROW_OP_CHECK)
#undef AMPC_ROW_OP_CHECK

enum class RowOp {
#define AMPC_ROW_OP_ENUM(NAME, SPEC) NAME,
  AMPC_ROW_OPS(AMPC_ROW_OP_ENUM)
#undef AMPC_ROW_OP_ENUM
};

// Every op of the list, for tests and tables that visit them all.
constexpr RowOp kRowOps[] = {
#define AMPC_ROW_OP_VALUE(NAME, SPEC) RowOp::NAME,
    AMPC_ROW_OPS(AMPC_ROW_OP_VALUE)
#undef AMPC_ROW_OP_VALUE
};

// f(SPEC{}) for op's spec; false for a value outside the list.
template <typename F>
bool visit_row_op(RowOp op, F&& f) {
  switch (op) {
#define AMPC_ROW_OP_CASE(NAME, SPEC) \
  case RowOp::NAME:                  \
    f(SPEC{});                       \
    return true;
    AMPC_ROW_OPS(AMPC_ROW_OP_CASE)
#undef AMPC_ROW_OP_CASE
  }
  return false;
}

// A pass's combine as a functor (the tree reductions take one).
template <typename Spec>
struct PassCombine {
  int pass;
  template <typename M>
  AMPC_HD M operator()(M a, M b) const {
    return Spec::combine(pass, a, b);
  }
};

// Room for a spec's statistics and per-row operands (at least one element each).
template <typename Spec>
constexpr int stats_size() {
  return Spec::kPasses > 0 ? Spec::kPasses : 1;
}
template <typename Spec>
constexpr int row_operands_size() {
  return Spec::kRowOperands > 0 ? Spec::kRowOperands : 1;
}

}  // namespace ampc::kernels::shared
