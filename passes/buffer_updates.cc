#include "passes/buffer_updates.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "passes/model_metadata.h"

namespace ampc::passes {

int add_buffer_updates(ir::Model& model) {
  ir::Graph& g = *model.graph;
  int added = 0;
  for (const std::string& name : metadata_lines(model, kBufferUpdatesKey)) {
    const std::string what = "buffer '" + name + "' (metadata " + kBufferUpdatesKey + ")";
    ir::Value* buffer = g.find_value(name);
    if (!buffer || !buffer->is_initializer() || buffer->is_graph_input)
      throw Error(what + " is not an initializer of the model");
    const std::string output = kBufferUpdateOutputPrefix + name;
    auto it = std::find_if(g.outputs.begin(), g.outputs.end(),
                           [&](const ir::Value* v) { return v->name == output; });
    if (it == g.outputs.end()) throw Error(what + " has no output '" + output + "'");
    ir::Value* value = *it;
    if (value->type.dtype != buffer->type.dtype || value->type.shape != buffer->type.shape)
      throw Error(what + " is " + buffer->type.str() + ", its output '" + output + "' " +
                  value->type.str());
    g.outputs.erase(it);
    model.state_updates.push_back({buffer, value});
    ++added;
  }
  return added;
}

}  // namespace ampc::passes
