#include "passes/data_parallel.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

#include "base/error.h"
#include "ops/schemas/ampc_schemas.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;

}  // namespace

int reduce_gradients(ir::Model& model, std::vector<ParameterGradient>& gradients,
                     const DataParallelOptions& options) {
  if (!options.enabled || gradients.empty()) return 0;
  const DType low = options.reduce_dtype;
  if (low != DType::kUndefined && low != DType::kFloat16 && low != DType::kBFloat16 &&
      low != DType::kFloat32)
    throw Error("gradients can be all-reduced in fp32, fp16 or bf16, not " +
                std::string(dtype_name(low)));
  if (options.bucket_bytes < 1) throw Error("the all-reduce bucket size must be positive");
  ir::Graph& g = *model.graph;
  if (!model.opset_version(ops::kAmpcDomain))
    model.opsets.push_back({ops::kAmpcDomain, ops::kAmpcDomainVersion});
  std::unordered_map<const ir::Node*, int64_t> position;
  for (size_t i = 0; i < g.nodes.size(); ++i) position[g.nodes[i].get()] = static_cast<int64_t>(i);
  auto produced_at = [&](const ParameterGradient& pg) {
    const ir::Node* p = pg.gradient->producer;
    return p ? position.at(p) : int64_t{-1};
  };
  // Backward order: the order of the nodes that produce the gradients.
  std::vector<size_t> order(gradients.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return produced_at(gradients[a]) < produced_at(gradients[b]);
  });
  // A bucket closes at the size limit, and where the gradients' dtype changes (one output
  // dtype per node).
  std::vector<std::vector<size_t>> buckets;
  int64_t bytes = 0;
  DType bucket_dtype = DType::kUndefined;
  for (size_t i : order) {
    const ir::Value* v = gradients[i].gradient;
    if (!v->type.is_static())
      throw Error("data parallel: the gradient of '" + gradients[i].parameter->name +
                  "' has no static shape");
    if (buckets.empty() || bytes >= options.bucket_bytes || v->type.dtype != bucket_dtype) {
      buckets.emplace_back();
      bytes = 0;
      bucket_dtype = v->type.dtype;
    }
    buckets.back().push_back(i);
    const DType t = low == DType::kUndefined ? v->type.dtype : low;
    bytes += ir::shape_numel(*v->type.shape) * static_cast<int64_t>(dtype_size(t));
  }

  GradBuilder b(g, "dp/allreduce");
  // (position of the node to follow, that node or null for the front, the start)
  std::vector<std::tuple<int64_t, const ir::Node*, ir::Node*>> starts;
  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<ir::Value*> in;
    std::vector<ir::TensorType> in_flight, reduced;
    int64_t ready = -1;
    for (size_t i : buckets[k]) {
      ir::Value* v = gradients[i].gradient;
      in.push_back(v);
      reduced.push_back(v->type);
      in_flight.push_back({low == DType::kUndefined ? v->type.dtype : low, v->type.shape});
      ready = std::max(ready, produced_at(gradients[i]));
    }
    const auto bucket = static_cast<int64_t>(k);
    auto started =
        b.op_n("AllReduceStart", in, in_flight,
               attrs(ir::Attribute::make_int("bucket", bucket),
                     ir::Attribute::make_int("to", static_cast<int64_t>(in_flight[0].dtype))),
               ops::kAmpcDomain);
    starts.emplace_back(ready, ready < 0 ? nullptr : g.nodes[static_cast<size_t>(ready)].get(),
                        g.nodes.back().get());
    auto waited =
        b.op_n("AllReduceWait", started, reduced,
               attrs(ir::Attribute::make_int("bucket", bucket),
                     ir::Attribute::make_int("to", static_cast<int64_t>(reduced[0].dtype))),
               ops::kAmpcDomain);
    for (size_t j = 0; j < in.size(); ++j) gradients[buckets[k][j]].gradient = waited[j];
  }
  // Each start right after the node that completes its bucket (latest insertion point first,
  // as the order of the starts that follow the same node depends on it).
  std::sort(starts.begin(), starts.end(),
            [](const auto& a, const auto& c) { return std::get<0>(a) > std::get<0>(c); });
  for (const auto& [ready, after, start] : starts) g.move_node_after(start, after);
  return static_cast<int>(buckets.size());
}

}  // namespace ampc::passes
