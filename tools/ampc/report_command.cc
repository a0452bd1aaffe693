// `ampc report FILE.jsonl [--out DIR] [--log TRAIN_LOG.jsonl] [--format json]`: the fp16
// range report of a `ampc train --grad-stats` log (runtime/stats/range_report.h): per-layer
// table, verdict on loss scaling, and SVG pictures.
#include <iostream>

#include "base/error.h"
#include "runtime/stats/range_report.h"
#include "runtime/stats/report_charts.h"
#include "tools/ampc/commands.h"
#include "tools/ampc/report_json.h"

namespace ampc::cli {
namespace {

struct ReportArgs {
  std::string stats;
  std::string out_dir;
  std::string train_log;
  std::string format = "text";
};

void run_report(const ReportArgs& args) {
  const rt::stats::RangeReport r = rt::stats::analyze(rt::stats::read_jsonl(args.stats));
  std::optional<rt::stats::TrainLog> log;
  if (!args.train_log.empty()) log = rt::stats::read_train_log(args.train_log);
  if (args.format == "json") {
    std::cout << report_json(r).dump(2) << '\n';
  } else {
    std::cout << rt::stats::report_text(r);
  }
  std::cout << std::flush;
  if (args.out_dir.empty()) return;
  for (const auto& f : rt::stats::write_charts(r, log ? &*log : nullptr, args.out_dir))
    std::cerr << "wrote " << f << '\n';
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report", "fp16 range report of `ampc train --grad-stats` statistics: table, verdict, SVGs");
  cmd->add_option("stats", args->stats, "The --grad-stats .jsonl file")->required();
  cmd->add_option("--out", args->out_dir, "Write SVG pictures into this folder");
  cmd->add_option("--log", args->train_log,
                  "The run's `ampc train --log` file: loss, scale and skipped steps pictures");
  cmd->add_option("--format", args->format, "Output format")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([args] {
    if (!args->train_log.empty() && args->out_dir.empty())
      throw Error("--log draws pictures: give --out DIR too");
    run_report(*args);
  });
}

}  // namespace ampc::cli
