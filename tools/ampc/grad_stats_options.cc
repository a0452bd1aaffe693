#include "tools/ampc/grad_stats_options.h"

#include "base/error.h"

namespace ampc::cli {

void add_grad_stats_options(CLI::App* cmd, GradStatsArgs& args) {
  cmd->add_option("--grad-stats", args.file,
                  "Write fp16 range statistics of every parameter gradient to this .jsonl file "
                  "(computed inside the step; see `ampc report`)");
  cmd->add_option("--grad-stats-every", args.every, "... for steps 1, 1+K, 1+2K, ... (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--activation-stats", args.activations,
                "With --grad-stats: also every activation of the forward pass");
}

GradStats::GradStats(const plan::Plan& p, const GradStatsArgs& args) {
  for (const auto& b : p.inputs()) has_input_ |= b.name() == rt::stats::kStatsEnabledInput;
  if (args.file.empty()) {
    if (args.activations) throw Error("--activation-stats needs --grad-stats FILE");
    return;
  }
  log_ = std::make_unique<rt::stats::RangeStatsLog>(p, args.file, args.every);
  if (!has_input_) throw Error("the plan's range statistics have no switch input");
}

void GradStats::feed(std::map<std::string, rt::Tensor>& feeds, int64_t step,
                     bool last_micro) const {
  if (has_input_)
    rt::stats::RangeStatsLog::set_enabled(feeds, log_ && last_micro && log_->records(step));
}

void GradStats::write(int64_t step, const std::map<std::string, rt::Tensor>& outputs) {
  if (log_ && log_->records(step)) log_->write(step, outputs);
}

}  // namespace ampc::cli
