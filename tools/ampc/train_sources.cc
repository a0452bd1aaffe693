#include "tools/ampc/train_sources.h"

#include <cmath>

#include "base/error.h"
#include "runtime/plan/plan_file.h"

namespace ampc::cli {

void check_train_args(const TrainArgs& args) {
  if (args.steps <= 0) throw Error("--steps must be at least 1");
  if (!args.eval_data.empty() && args.holdout > 0)
    throw Error("--eval and --holdout both name held-out data; give one");
  if (args.checkpoint_every > 0 && args.checkpoint.empty())
    throw Error("--checkpoint-every needs --checkpoint FILE");
}

plan::Plan training_plan(TrainArgs& args) {
  if (plan::looks_like_plan(args.model)) {
    auto given = compile_options_given(args.training);
    if (!args.input_shapes.empty()) given.push_back("--input-shape");
    for (const auto& name : args.dp.compile_options_given) given.push_back(name);
    if (args.dp.sync_batchnorm) given.push_back("--sync-batchnorm");
    if (!given.empty()) {
      std::string names;
      for (const auto& n : given) names += (names.empty() ? "" : ", ") + n;
      throw Error(names + ": '" + args.model +
                  "' is compiled already, so these cannot change it; give them to `ampc "
                  "compile`, or train the ONNX model");
    }
    plan::Plan p = plan::load_plan(args.model);
    if (p.state_updates_size() == 0) {
      throw Error("'" + args.model + "' is a forward plan; compile it with `ampc compile --train`");
    }
    return p;
  }
  auto& o = args.compile;
  o.train = true;
  for (const auto& spec : args.input_shapes) onnx_io::parse_input_shape(spec, o.import);
  finish_training_options(o, args.training);
  o.range_stats = args.grad_stats.compile_options();
  o.lowering.target = args.target;  // the device's: no PTX for the CPU
  set_data_parallel_options(args.dp, args.world, o);
  return compiler::compile_file(args.model, o);
}

std::pair<rt::data::Dataset, std::optional<rt::data::Dataset>> open_data(const TrainArgs& args) {
  rt::data::Dataset data = rt::data::Dataset::open(args.data);
  if (!args.eval_data.empty()) return {data, rt::data::Dataset::open(args.eval_data)};
  if (args.holdout <= 0) return {data, std::nullopt};
  const auto held = static_cast<int64_t>(std::llround(args.holdout * data.samples()));
  if (held < 1 || held >= data.samples()) {
    throw Error("--holdout " + std::to_string(args.holdout) + " of " +
                std::to_string(data.samples()) + " samples leaves no training or no held-out data");
  }
  auto [train, eval] = rt::data::split(data, data.samples() - held);
  return {train, eval};
}

}  // namespace ampc::cli
