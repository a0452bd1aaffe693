#include "runtime/cpu/library_step.h"

#include "base/error.h"

namespace ampc::rt::cpu {
namespace {

constexpr const char* kTransA = "ampc_trans_a";
constexpr const char* kTransB = "ampc_trans_b";

bool flag(const plan::Step& step, const char* name) {
  for (const auto& a : step.attributes()) {
    if (a.name() == name) return a.i() != 0;
  }
  return false;
}

std::string label(const plan::Step& step) {
  return "node '" + (step.source_nodes_size() ? step.source_nodes(0) : std::string("?")) + "' (" +
         step.op() + ")";
}

plan::Attribute ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  plan::Attribute a;
  a.set_name(name);
  for (int64_t x : v) a.mutable_ints()->add_v(x);
  return a;
}

// 0, 1, ..., rank - 1, or with the last two swapped.
std::vector<int64_t> axes(int64_t rank, bool swap_last_two) {
  std::vector<int64_t> v(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) v[static_cast<size_t>(i)] = i;
  if (swap_last_two && rank >= 2) std::swap(v[v.size() - 1], v[v.size() - 2]);
  return v;
}

}  // namespace

bool has_folded_work(const plan::Step& step) {
  return !step.epilogue().empty() || flag(step, kTransA) || flag(step, kTransB);
}

FoldedGemm::FoldedGemm(const CpuOp& op, const plan::Step& step, const plan::Plan& plan)
    : op_(op), step_(step) {
  const std::string& epilogue = step.epilogue();
  const bool matmul = step.op() == "MatMul";
  relu_ = epilogue == "RELU" || epilogue == "RELU_BIAS";
  bias_input_ = matmul && (epilogue == "BIAS" || epilogue == "RELU_BIAS");
  bgrad_ = epilogue == "BGRADB";
  if (!epilogue.empty() && epilogue != "BIAS" && !relu_ && !bgrad_)
    throw Error(label(step) + ": the CPU backend does not know epilogue '" + epilogue + "'");
  core_inputs_ = matmul ? 2 : std::min<size_t>(static_cast<size_t>(step.inputs_size()), 3);
  if (static_cast<size_t>(step.inputs_size()) < core_inputs_ + (bias_input_ ? 1 : 0))
    throw Error(label(step) + ": missing inputs for epilogue " + epilogue);
  if (bgrad_ && step.outputs_size() < 2)
    throw Error(label(step) + ": epilogue BGRADB needs a second output");
  trans_a_ = flag(step, kTransA);
  trans_b_ = flag(step, kTransB);
  call_ = step;
  call_.clear_epilogue();
  call_.clear_inputs();
  call_.clear_outputs();
  call_.mutable_attributes()->Clear();
  for (const auto& a : step.attributes()) {
    if (a.name() != kTransA && a.name() != kTransB) *call_.add_attributes() = a;
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
  if (trans_a_) transpose_a_ = folded("Transpose", {ints_attr("perm", axes(rank(0), true))});
  if (trans_b_) transpose_b_ = folded("Transpose", {ints_attr("perm", axes(rank(1), true))});
  if (matmul) {
    dnnl_ = DnnlFoldedMatmul::make(step, plan, {trans_a_, trans_b_, bias_input_, relu_});
  }
  if (bias_input_) add_ = folded("Add", {});
  if (relu_) relu_op_ = folded("Relu", {});
  if (bgrad_) {
    // The column sums: every axis but the last, as legalize would type them.
    reduce_sum_ = folded("ReduceSum", {});
    plan::ReduceParams* sum = reduce_sum_.step.mutable_reduce();
    sum->set_kind(plan::ReduceParams::SUM);
    for (int64_t a : axes(rank(1) - 1, false)) sum->add_axes(a);
  }
}

FoldedGemm::Folded FoldedGemm::folded(const std::string& op,
                                      std::vector<plan::Attribute> attributes) const {
  Folded f;
  f.op = OpRegistry::instance().find(op, "");
  if (!f.op) throw Error(label(step_) + ": no CPU operator " + op + " for the folded work");
  f.step.set_op(op);
  f.step.set_opset_version(step_.opset_version());
  f.step.add_source_nodes(step_.source_nodes_size() ? step_.source_nodes(0) : "?");
  for (auto& a : attributes) *f.step.add_attributes() = std::move(a);
  return f;
}

void FoldedGemm::run_folded(const Folded& f, const std::vector<const Tensor*>& inputs,
                            Tensor* out) const {
  OpContext ctx(f.step, inputs, {out});
  (*f.op)(ctx);
}

void FoldedGemm::run(const std::vector<const Tensor*>& inputs,
                     const std::vector<Tensor*>& outputs) const {
  if (dnnl_ && dnnl_->run(*inputs[0], *inputs[1], bias_input_ ? inputs[core_inputs_] : nullptr,
                          outputs.at(0))) {
    if (bgrad_) run_folded(reduce_sum_, {inputs[1]}, outputs[1]);
    return;
  }
  // Operands, transposed as the flags say.
  Tensor ta, tb;
  std::vector<const Tensor*> core(inputs.begin(), inputs.begin() + core_inputs_);
  if (trans_a_) {
    run_folded(transpose_a_, {inputs[0]}, &ta);
    core[0] = &ta;
  }
  if (trans_b_) {
    run_folded(transpose_b_, {inputs[1]}, &tb);
    core[1] = &tb;
  }
  Tensor product, biased;
  Tensor* y = outputs.at(0);
  {
    OpContext ctx(call_, core, {bias_input_ || relu_ ? &product : y});
    op_(ctx);
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
