#include "tools/ampc/step_log.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace ampc::cli {

StepLog::StepLog(const std::string& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::trunc);
  if (!out_) throw Error("cannot write '" + path + "'");
}

void StepLog::write(const StepRecord& r) {
  nlohmann::ordered_json grad_norm = nullptr;
  if (r.grad_norm) grad_norm = *r.grad_norm;
  nlohmann::ordered_json j = {{"step", r.step},
                              {"loss", r.loss},
                              {"lr", r.lr},
                              {"scale", r.scale},
                              {"skipped", r.skipped},
                              {"grad_norm", grad_norm},
                              {"samples_per_s", r.samples_per_s}};
  if (!r.losses.empty()) {
    nlohmann::ordered_json each = nlohmann::ordered_json::object();
    for (const auto& [name, loss] : r.losses) each[name] = loss;
    j["losses"] = each;
  }
  out_ << j.dump() << '\n' << std::flush;
}

}  // namespace ampc::cli
