#include "tools/ampc/report_json.h"

namespace ampc::cli {

nlohmann::ordered_json report_json(const rt::stats::RangeReport& r) {
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const auto& t : r.tensors) {
    tensors.push_back(
        {{"kind", t.kind},
         {"tensor", t.tensor},
         {"node", t.node},
         {"depth", t.depth},
         {"records", t.records},
         {"max_abs", t.max_abs},
         {"min_nonzero_abs", t.min_nonzero_abs ? nlohmann::ordered_json(*t.min_nonzero_abs)
                                               : nlohmann::ordered_json(nullptr)},
         {"zero", t.zero},
         {"normal_unscaled", t.unscaled.normal},
         {"flush_unscaled", t.unscaled.flush},
         {"subnormal_unscaled", t.unscaled.subnormal},
         {"last_scale", t.last_scale},
         {"normal_at_scale", t.at_scale.normal}});
  }
  auto opt = [](const std::optional<int>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  return {{"tensors", tensors},
          {"scaling_needed", r.scaling_needed},
          {"flush_at_1", r.gradients_at_1.flush},
          {"subnormal_at_1", r.gradients_at_1.subnormal},
          {"gradient_max_abs", r.gradient_max_abs},
          {"scale_log2",
           {{"smallest", opt(r.scale.smallest)},
            {"largest", opt(r.scale.largest)},
            {"proposed", opt(r.scale.proposed)}}},
          {"normal_at_proposed", r.scale.normal_at_proposed},
          {"verdict", r.verdict}};
}

}  // namespace ampc::cli
