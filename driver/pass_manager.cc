#include "driver/pass_manager.h"

#include <algorithm>
#include <iostream>

#include "base/error.h"
#include "ir/printer.h"

namespace ampc::compiler {

PassManager::PassManager(std::vector<Pass> passes, PassOptions options, ir::VerifyOptions verify,
                         StageTimes* times)
    : passes_(std::move(passes)), options_(std::move(options)), verify_(verify), times_(times) {}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> out;
  for (const auto& p : passes_) out.push_back(p.name);
  return out;
}

void PassManager::check_print_after() const {
  const std::vector<std::string> valid = names();
  for (const auto& name : options_.print_after) {
    if (name == "all" || std::find(valid.begin(), valid.end(), name) != valid.end()) continue;
    std::string list = "all";
    for (const auto& v : valid) list += ", " + v;
    throw Error("--print-after: unknown pass '" + name + "'; the passes are: " + list);
  }
}

bool PassManager::prints_after(const std::string& pass) const {
  const auto& names = options_.print_after;
  return std::find(names.begin(), names.end(), "all") != names.end() ||
         std::find(names.begin(), names.end(), pass) != names.end();
}

void PassManager::run(ir::Model& model) const {
  check_print_after();
  std::ostream& out = options_.print_to ? *options_.print_to : std::cerr;
  for (const Pass& pass : passes_) {
    if (pass.enabled && !pass.enabled()) continue;
    if (pass.phase) model.graph->build_phase = *pass.phase;
    StageTimer timer(times_, pass.name);
    pass.run(model);
    timer.finish(static_cast<int64_t>(model.graph->nodes.size()));
    if (options_.verify_each) {
      try {
        ir::verify(model, verify_);
      } catch (const Error& e) {
        throw Error("the IR is invalid after pass '" + pass.name + "': " + e.what());
      }
    }
    // After verification: printing follows the IR's links, which a broken pass may leave
    // dangling.
    if (prints_after(pass.name)) out << print_after_header(pass.name) << ir::to_text(model);
  }
  out.flush();
}

std::string print_after_header(const std::string& pass) {
  return "# IR after pass '" + pass + "'\n";
}

}  // namespace ampc::compiler
