#include "runtime/cpu/library_step.h"

#include "base/error.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

bool is_matmul(const plan::Step& step) {
  return step.op() == "MatMul";
}

// A GEMM step's parameters; a step without them (not legalized) has nothing folded.
const plan::GemmParams& gemm_params(const plan::Step& step) {
  return step.has_gemm() ? step.gemm() : plan::GemmParams::default_instance();
}

std::string label(const plan::Step& step) {
  return "node '" + (step.source_nodes_size() ? step.source_nodes(0) : std::string("?")) + "' (" +
         step.op() + ")";
}

// 0, 1, ..., rank - 1, or with the last two swapped.
std::vector<int64_t> axes(int64_t rank, bool swap_last_two) {
  std::vector<int64_t> v(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) v[static_cast<size_t>(i)] = i;
  if (swap_last_two && rank >= 2) std::swap(v[v.size() - 1], v[v.size() - 2]);
  return v;
}

}  // namespace

// A MatMul's transposes are folded Transposes (the MatMul operator has none); a Gemm runs its
// own.
bool has_folded_work(const plan::Step& step) {
  const plan::GemmParams& g = gemm_params(step);
  return g.epilogue() != plan::GemmParams::NONE ||
         (is_matmul(step) &&
          (g.trans_a() || g.trans_b() || g.perm_a_size() || g.perm_b_size() || g.perm_y_size()));
}

FoldedGemm::FoldedGemm(const CpuOp& op, const plan::Step& step, const plan::Plan& plan)
    : op_(op), step_(step) {
  const plan::GemmParams& g = gemm_params(step);
  const plan::GemmParams::Epilogue epilogue = g.epilogue();
  const std::string name = plan::gemm_epilogue_name(step);
  const bool matmul = is_matmul(step);
  relu_ = epilogue == plan::GemmParams::RELU || epilogue == plan::GemmParams::RELU_BIAS;
  bias_input_ =
      matmul && (epilogue == plan::GemmParams::BIAS || epilogue == plan::GemmParams::RELU_BIAS);
  bgrad_ = epilogue == plan::GemmParams::BGRADB;
  if (epilogue != plan::GemmParams::NONE && epilogue != plan::GemmParams::BIAS && !relu_ && !bgrad_)
    throw Error(label(step) + ": the CPU backend does not know epilogue " + name);
  core_inputs_ = matmul ? 2 : std::min<size_t>(static_cast<size_t>(step.inputs_size()), 3);
  if (static_cast<size_t>(step.inputs_size()) < core_inputs_ + (bias_input_ ? 1 : 0))
    throw Error(label(step) + ": missing inputs for epilogue " + name);
  if (bgrad_ && step.outputs_size() < 2)
    throw Error(label(step) + ": epilogue BGRADB needs a second output");
  // A MatMul's folded transposes run as Transposes before it; a Gemm keeps its own.
  trans_a_ = matmul && g.trans_a();
  trans_b_ = matmul && g.trans_b();
  call_ = step;
  call_.clear_inputs();
  call_.clear_outputs();
  plan::GemmParams* call = call_.mutable_gemm();
  *call = g;
  call->set_epilogue(plan::GemmParams::NONE);
  if (matmul) {
    call->set_trans_a(false);
    call->set_trans_b(false);
    call->clear_perm_a();
    call->clear_perm_b();
    call->clear_perm_y();
  }
  // Permutations and reduced axes follow the operands' ranks, which the plan fixes.
  auto rank = [&](int k) {
    const int id = step.inputs(k);
    if (id < 0 || !plan.buffers(id).shape_known())
      throw Error(label(step) + ": a folded operand needs a static shape");
    const int64_t r = plan.buffers(id).shape_size();
    if (r < 2) throw Error(label(step) + ": a folded operand needs rank >= 2");
    return r;
  };
  // The Transposes that were folded, typed as legalize would type them: an operand's view
  // (perm_a / perm_b), then the swap of its last two axes (trans_a / trans_b); the result's.
  auto transpose = [&](const std::vector<int64_t>& perm) {
    Folded f = folded("Transpose");
    for (int64_t axis : perm) f.step.mutable_transpose()->add_perm(axis);
    return f;
  };
  std::vector<int64_t> perm_a, perm_b, perm_y;
  if (matmul) {
    perm_a.assign(g.perm_a().begin(), g.perm_a().end());
    perm_b.assign(g.perm_b().begin(), g.perm_b().end());
    perm_y.assign(g.perm_y().begin(), g.perm_y().end());
  }
  if (!perm_a.empty()) view_a_ = transpose(perm_a);
  if (!perm_b.empty()) view_b_ = transpose(perm_b);
  if (!perm_y.empty()) view_y_ = transpose(perm_y);
  if (trans_a_) transpose_a_ = transpose(axes(rank(0), true));
  if (trans_b_) transpose_b_ = transpose(axes(rank(1), true));
  // The compiler folds views only into GEMMs without an epilogue on the viewed side.
  if (((bias_input_ || relu_ || bgrad_) && !perm_y.empty()) || (bgrad_ && !perm_b.empty()))
    throw Error(label(step) + ": a transposed view with epilogue " + name);
  if (matmul) {
    dnnl_ = DnnlFoldedMatmul::make(
        step, plan, {trans_a_, trans_b_, bias_input_, relu_, perm_a, perm_b, perm_y});
    if (bias_input_) dnnl_bias_ = static_cast<int>(core_inputs_);
  } else if (relu_) {
    // A Gemm with its Relu folded (a training plan's Linear + ReLU): its C as the primitive's
    // bias and the Relu as its post-op, in one pass over the result instead of the product
    // into a temporary and a second pass for the Relu.
    const bool c = core_inputs_ > 2 && step.inputs(2) >= 0;
    dnnl_ = DnnlFoldedMatmul::make(step, plan, {g.trans_a(), g.trans_b(), c, true, {}, {}, {}});
    if (c) dnnl_bias_ = 2;
  }
  if (bias_input_) add_ = folded("Add");
  if (relu_) relu_op_ = folded("Relu");
  if (bgrad_) {
    // The column sums: every axis but the last, as legalize would type them.
    reduce_sum_ = folded("ReduceSum");
    plan::ReduceParams* sum = reduce_sum_.step.mutable_reduce();
    sum->set_kind(plan::ReduceParams::SUM);
    for (int64_t a : axes(rank(1) - 1, false)) sum->add_axes(a);
  }
}

FoldedGemm::Folded FoldedGemm::folded(const std::string& op) const {
  Folded f;
  f.op = OpRegistry::instance().find(op, "");
  if (!f.op) throw Error(label(step_) + ": no CPU operator " + op + " for the folded work");
  f.step.set_op(op);
  f.step.set_opset_version(step_.opset_version());
  f.step.add_source_nodes(step_.source_nodes_size() ? step_.source_nodes(0) : "?");
  return f;
}

void FoldedGemm::run_folded(const Folded& f, const std::vector<const Tensor*>& inputs,
                            Tensor* out) const {
  OpContext ctx(f.step, inputs, {out});
  (*f.op)(ctx);
}

void FoldedGemm::run(const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs) const {
  const Tensor* bias = dnnl_bias_ >= 0 ? inputs.at(static_cast<size_t>(dnnl_bias_)) : nullptr;
  if (dnnl_ && dnnl_->run(*inputs[0], *inputs[1], bias, outputs.at(0))) {
    if (bgrad_) run_folded(reduce_sum_, {inputs[1]}, outputs[1]);
    return;
  }
  // Operands, through their views and transposed as the flags say.
  Tensor va, vb, ta, tb;
  std::vector<const Tensor*> core(inputs.begin(), inputs.begin() + core_inputs_);
  auto operand = [&](int k, const Folded& view, const Folded& transpose, Tensor* viewed,
                     Tensor* transposed) {
    if (view.op) {
      run_folded(view, {core[k]}, viewed);
      core[k] = viewed;
    }
    if (transpose.op) {
      run_folded(transpose, {core[k]}, transposed);
      core[k] = transposed;
    }
  };
  operand(0, view_a_, transpose_a_, &va, &ta);
  operand(1, view_b_, transpose_b_, &vb, &tb);
  Tensor product, biased;
  Tensor* y = outputs.at(0);
  {
    OpContext ctx(call_, core, {bias_input_ || relu_ || view_y_.op ? &product : y});
    op_(ctx);
  }
  if (view_y_.op) {
    run_folded(view_y_, {&product}, y);
    return;
  }
  const Tensor* last = &product;
  if (bias_input_) {
    run_folded(add_, {&product, inputs[core_inputs_]}, relu_ ? &biased : y);
    last = &biased;
  }
  if (relu_) run_folded(relu_op_, {last}, y);
  // The bias gradient: the B operand (as given, untransposed) summed over its rows.
  if (bgrad_) run_folded(reduce_sum_, {inputs[1]}, outputs[1]);
}

}  // namespace ampc::rt::cpu
