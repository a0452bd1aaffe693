#include "passes/half_inputs.h"

#include <algorithm>

#include "base/error.h"

namespace ampc::passes {

int halve_float_inputs(ir::Model& model, DType low) {
  if (low != DType::kFloat16 && low != DType::kBFloat16)
    throw Error("--half-inputs needs --precision fp16 or bf16");
  ir::Graph& g = *model.graph;
  int converted = 0;
  for (ir::Value* in : g.inputs) {
    if (in->is_initializer() || in->type.dtype != DType::kFloat32) continue;
    std::vector<ir::Use> uses = in->uses;
    ir::Value* wide = g.add_value(in->name + ".f32", in->type);
    in->type.dtype = low;
    ir::Node* cast = g.add_node("Cast", {in}, {wide}, "half_inputs/" + in->name);
    cast->attributes.push_back(
        ir::Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32)));
    for (const ir::Use& u : uses) {
      u.node->inputs[static_cast<size_t>(u.input_index)] = wide;
      wide->uses.push_back(u);
    }
    std::erase_if(in->uses, [&](const ir::Use& u) { return u.node != cast; });
    std::rotate(g.nodes.begin(), g.nodes.end() - 1, g.nodes.end());  // the Cast first
    // A graph output that is the input itself keeps reading the wide value.
    std::replace(g.outputs.begin(), g.outputs.end(), in, wide);
    ++converted;
  }
  return converted;
}

}  // namespace ampc::passes
