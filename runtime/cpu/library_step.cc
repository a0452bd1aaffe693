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

// Runs the registry's `op` on `inputs` into `out`, with the attributes given.
void run_op(const plan::Step& parent, const std::string& op,
            const std::vector<const Tensor*>& inputs, Tensor* out,
            const std::vector<plan::Attribute>& attributes = {}) {
  const CpuOp* fn = OpRegistry::instance().find(op, "");
  if (!fn) throw Error(label(parent) + ": no CPU operator " + op + " for the folded work");
  plan::Step s;
  s.set_op(op);
  s.set_opset_version(parent.opset_version());
  s.add_source_nodes(parent.source_nodes_size() ? parent.source_nodes(0) : "?");
  for (const auto& a : attributes) *s.add_attributes() = a;
  OpContext ctx(s, inputs, {out});
  (*fn)(ctx);
}

plan::Attribute ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  plan::Attribute a;
  a.set_name(name);
  for (int64_t x : v) a.mutable_ints()->add_v(x);
  return a;
}

plan::Attribute int_attr(const std::string& name, int64_t v) {
  plan::Attribute a;
  a.set_name(name);
  a.set_i(v);
  return a;
}

// The operand with its last two axes swapped.
Tensor transposed(const plan::Step& step, const Tensor& x) {
  if (x.rank() < 2) throw Error(label(step) + ": a transposed operand needs rank >= 2");
  std::vector<int64_t> perm(static_cast<size_t>(x.rank()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  Tensor t;
  run_op(step, "Transpose", {&x}, &t, {ints_attr("perm", perm)});
  return t;
}

}  // namespace

bool has_folded_work(const plan::Step& step) {
  return !step.epilogue().empty() || flag(step, kTransA) || flag(step, kTransB);
}

void run_library_step(const CpuOp& op, const plan::Step& step,
                      const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs) {
  const std::string& epilogue = step.epilogue();
  const bool matmul = step.op() == "MatMul";
  const bool bias_input = matmul && (epilogue == "BIAS" || epilogue == "RELU_BIAS");
  const size_t core_inputs = matmul ? 2 : std::min<size_t>(inputs.size(), 3);
  if (inputs.size() < core_inputs + (bias_input ? 1 : 0))
    throw Error(label(step) + ": missing inputs for epilogue " + epilogue);
  // Operands, transposed as the flags say.
  Tensor ta, tb;
  std::vector<const Tensor*> core(inputs.begin(), inputs.begin() + core_inputs);
  if (flag(step, kTransA)) core[0] = &(ta = transposed(step, *inputs[0]));
  if (flag(step, kTransB)) core[1] = &(tb = transposed(step, *inputs[1]));
  // The call itself, without the folded attributes.
  plan::Step call = step;
  call.clear_epilogue();
  call.clear_inputs();
  call.clear_outputs();
  call.mutable_attributes()->Clear();
  for (const auto& a : step.attributes()) {
    if (a.name() != kTransA && a.name() != kTransB) *call.add_attributes() = a;
  }
  const bool relu = epilogue == "RELU" || epilogue == "RELU_BIAS";
  Tensor product, biased;
  Tensor* y = outputs.at(0);
  {
    OpContext ctx(call, core, {bias_input || relu ? &product : y});
    op(ctx);
  }
  const Tensor* last = &product;
  if (bias_input) {
    run_op(step, "Add", {&product, inputs[core_inputs]}, relu ? &biased : y);
    last = &biased;
  }
  if (relu) run_op(step, "Relu", {last}, y);
  if (epilogue == "BGRADB") {
    // The bias gradient: the B operand (as given, untransposed) summed over its rows.
    if (outputs.size() < 2 || !outputs[1])
      throw Error(label(step) + ": epilogue BGRADB needs a second output");
    const Tensor& b = *inputs[1];
    std::vector<int64_t> axes;
    for (int64_t i = 0; i + 1 < b.rank(); ++i) axes.push_back(i);
    run_op(step, "ReduceSum", {&b}, outputs[1], {ints_attr("axes", axes), int_attr("keepdims", 0)});
  } else if (!epilogue.empty() && epilogue != "BIAS" && !relu) {
    throw Error(label(step) + ": the CPU backend does not know epilogue '" + epilogue + "'");
  }
}

}  // namespace ampc::rt::cpu
