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
    ir::Value* wide = g.add_value(in->name + ".f32", in->type);
    in->type.dtype = low;
    // Every reader reads the wide value, which a Cast, the first node, makes.
    ir::replace_all_uses(in, wide);
    ir::Node* cast = g.insert_node_after(nullptr, "Cast", {in}, {wide}, "half_inputs/" + in->name);
    cast->attributes.push_back(
        ir::Attribute::make_int("to", static_cast<int64_t>(DType::kFloat32)));
    // A graph output that is the input itself keeps reading the wide value.
    std::replace(g.outputs.begin(), g.outputs.end(), in, wide);
    ++converted;
  }
  return converted;
}

}  // namespace ampc::passes
