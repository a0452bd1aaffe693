#include "passes/lr_schedule.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "base/error.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using ir::Value;

Value* scalar_op(autodiff::GradBuilder& b, const char* op, std::vector<Value*> in) {
  const ir::TensorType type = in[0]->type;
  return b.op(op, std::move(in), type);
}

// The cosine factor of each count 0..d, in double, as float32 (CosineAnnealingLR's closed
// form, which its recursive form equals within the first period).
Value* cosine_table(autodiff::GradBuilder& b, int64_t d, double m, DType t) {
  ir::TensorType type{t, std::vector<int64_t>{d + 1}};
  Value* table = b.filled(0, type);
  auto& bytes = table->initializer->bytes;
  for (int64_t e = 0; e <= d; ++e) {
    const double f =
        m + (1 - m) *
                (1 + std::cos(std::numbers::pi * static_cast<double>(e) / static_cast<double>(d))) /
                2;
    if (t == DType::kFloat64) {
      std::memcpy(bytes.data() + e * 8, &f, 8);
    } else {
      const auto v = static_cast<float>(f);
      std::memcpy(bytes.data() + e * 4, &v, 4);
    }
  }
  return table;
}

}  // namespace

void check_lr_schedule(const LrSchedule& s) {
  if (s.kind != "constant" && s.kind != "step" && s.kind != "cosine" && s.kind != "linear")
    throw Error("--lr-schedule " + s.kind + ": expected constant, step, cosine or linear");
  if (s.warmup_steps < 0) throw Error("--warmup-steps must be at least 0");
  if (s.warmup_start_factor < 0 || s.warmup_start_factor > 1)
    throw Error("--warmup-start-factor must be in [0, 1]");
  if (s.min_lr_factor < 0 || s.min_lr_factor > 1) throw Error("--min-lr-factor must be in [0, 1]");
  if (s.kind == "step" && s.step_size <= 0)
    throw Error("--lr-schedule step needs --step-size N (N > 0)");
  if ((s.kind == "cosine" || s.kind == "linear") && s.total_steps <= s.warmup_steps) {
    throw Error("--lr-schedule " + s.kind + " needs --total-steps greater than --warmup-steps (" +
                std::to_string(s.total_steps) + " <= " + std::to_string(s.warmup_steps) + ")");
  }
}

Value* add_lr_schedule(ir::Model& model, autodiff::GradBuilder& b, Value* base_lr,
                       const LrSchedule& s, Value* advance) {
  check_lr_schedule(s);
  const DType t = base_lr->type.dtype;
  ir::Graph& g = *model.graph;
  if (g.find_value(kScheduleStepName))
    throw Error(std::string("cannot add '") + kScheduleStepName + "': the name is taken");
  Value* count = b.scalar(0, t);
  g.rename_value(count, kScheduleStepName);
  count->initializer->name = kScheduleStepName;
  Value* next = scalar_op(b, "Add", {count, b.scalar(1, t)});
  if (advance) next = b.op("Where", {advance, next, count}, count->type);
  model.state_updates.push_back({count, next});

  auto c = [&](double v) { return b.scalar(v, t); };
  Value* factor = nullptr;
  const double w = static_cast<double>(s.warmup_steps);
  Value* after = count;  // e'
  if (s.warmup_steps > 0) {
    Value* ramp = scalar_op(b, "Div", {scalar_op(b, "Min", {count, c(w)}), c(w)});
    factor = scalar_op(
        b, "Add",
        {c(s.warmup_start_factor), scalar_op(b, "Mul", {ramp, c(1 - s.warmup_start_factor)})});
    after = scalar_op(b, "Max", {scalar_op(b, "Sub", {count, c(w)}), c(0)});
  }
  const auto d = s.total_steps - s.warmup_steps;
  Value* decay = nullptr;
  if (s.kind == "step") {
    decay = b.op("Pow",
                 {c(s.gamma),
                  scalar_op(b, "Floor",
                            {scalar_op(b, "Div", {after, c(static_cast<double>(s.step_size))})})},
                 count->type);
  } else if (s.kind == "linear") {
    Value* done = scalar_op(
        b, "Div",
        {scalar_op(b, "Min", {after, c(static_cast<double>(d))}), c(static_cast<double>(d))});
    decay = scalar_op(b, "Add", {c(1), scalar_op(b, "Mul", {done, c(s.min_lr_factor - 1)})});
  } else if (s.kind == "cosine") {
    Value* index = b.op("Cast", {scalar_op(b, "Min", {after, c(static_cast<double>(d))})},
                        {DType::kInt64, std::vector<int64_t>{}},
                        attrs(ir::Attribute::make_int("to", static_cast<int64_t>(DType::kInt64))));
    decay = b.op("Gather", {cosine_table(b, d, s.min_lr_factor, t), index}, count->type,
                 attrs(ir::Attribute::make_int("axis", 0)));
  }
  if (decay) factor = factor ? scalar_op(b, "Mul", {factor, decay}) : decay;
  Value* lr =
      factor ? scalar_op(b, "Mul", {base_lr, factor}) : b.op("Identity", {base_lr}, base_lr->type);
  g.rename_value(lr, kStepLrName);
  // The step's lr is read inside fused kernels only; as the source of a state (the last
  // step's lr, also in checkpoints) it keeps a buffer the trainer can report.
  if (g.find_value(kLastLrName))
    throw Error(std::string("cannot add '") + kLastLrName + "': the name is taken");
  Value* last = b.scalar(0, t);
  g.rename_value(last, kLastLrName);
  last->initializer->name = kLastLrName;
  model.state_updates.push_back({last, lr});
  return lr;
}

}  // namespace ampc::passes
