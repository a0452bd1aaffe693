// The legalize stage for the data movement both backends run: Transpose, Concat, Split,
// Gather, Cast, Slice, Pad, the scatter ops and the all-reduce's start and wait (plan.proto's
// TransposeParams
// ... PadParams). Opset differences are settled here: Concat's default axis before opset 4,
// Cast's type names in opset 1, Split's sizes and Slice's ranges as attributes or constant
// inputs, Pad's `paddings` / `pads` / `value` against its inputs.
#include <cctype>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "lower/legalize_parts.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::lower::detail {
namespace {

using rt::cpu::normalize_axis;

// An axis normalised to [0, rank) where input `input`'s rank is known; as given otherwise
// (the backends normalise it against the tensor they get).
int64_t axis_of(const Attrs& a, const StepOperands& in, int input, int64_t axis) {
  const std::optional<int64_t> rank = known_rank(in, input);
  return rank ? normalize_axis(a, axis, *rank) : axis;
}

// The values of constant input `i`, or nullopt when it is computed at run time.
std::optional<std::vector<int64_t>> constant_input(const StepOperands& in, int i) {
  return in.constant_ints ? in.constant_ints(i) : std::nullopt;
}

// Input `i` leaves the step (its values are in the parameters): omitted, and trailing omitted
// inputs dropped.
void drop_input(plan::Step& step, int i) {
  if (step.inputs_size() > i) step.set_inputs(i, -1);
  while (step.inputs_size() > 1 && step.inputs(step.inputs_size() - 1) < 0)
    step.mutable_inputs()->RemoveLast();
}

void add_all(google::protobuf::RepeatedField<int64_t>* out, const std::vector<int64_t>& v) {
  for (int64_t x : v) out->Add(x);
}

void transpose_params(const Attrs& a, const StepOperands& in, plan::TransposeParams* p) {
  std::vector<int64_t> perm = a.attr_ints("perm");
  if (const std::optional<int64_t> rank = known_rank(in, 0)) {
    if (perm.empty()) {
      for (int64_t i = *rank; i-- > 0;) perm.push_back(i);
    }
    if (static_cast<int64_t>(perm.size()) != *rank) a.fail("perm does not match the input rank");
    for (int64_t& axis : perm) axis = normalize_axis(a, axis, *rank);
  }
  add_all(p->mutable_perm(), perm);
}

// Split: sizes from the attribute (before opset 13) or a constant input 1 (which leaves the
// step); input 1 computed at run time stays for the CPU backend.
void split_params(const Attrs& a, plan::Step& step, const StepOperands& in, plan::AxisParams* p) {
  p->set_axis(axis_of(a, in, 0, a.attr_int("axis", 0)));
  if (a.opset() < 13) return add_all(p->mutable_split(), a.attr_ints("split"));
  if (!has_input(step, in, 1)) return;
  const std::optional<std::vector<int64_t>> sizes = constant_input(in, 1);
  if (!sizes) return p->set_runtime_split(true);
  add_all(p->mutable_split(), *sizes);
  drop_input(step, 1);
}

// Cast's target: a type code, or (opset 1) a type name.
void cast_params(const Attrs& a, const plan::Step& step, plan::CastParams* p) {
  for (const auto& attr : step.attributes()) {
    if (attr.name() != "to" || attr.value_case() != plan::Attribute::kS) continue;
    std::string name = attr.s();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::optional<DType> t = dtype_from_name(name);
    if (!t) a.fail("attribute 'to' value '" + attr.s() + "' is not a known element type");
    return p->set_to(static_cast<int32_t>(*t));
  }
  const int64_t to = a.attr_int("to");
  if (!dtype_is_known(static_cast<int32_t>(to)))
    a.fail("attribute 'to' value " + std::to_string(to) + " is not a known element type");
  p->set_to(static_cast<int32_t>(to));
}

// Slice: attributes before opset 10; from 10 the inputs starts, ends, axes, steps, moved into
// the parameters when all are constants.
void slice_params(const Attrs& a, plan::Step& step, const StepOperands& in, plan::SliceParams* p) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (a.opset() < 10) {
    starts = a.attr_ints("starts");
    ends = a.attr_ints("ends");
    axes = a.attr_ints("axes");
  } else {
    std::vector<std::vector<int64_t>*> parts = {&starts, &ends, &axes, &steps};
    for (int i = 1; i <= 4; ++i) {
      if (!has_input(step, in, i)) continue;
      const std::optional<std::vector<int64_t>> v = constant_input(in, i);
      if (!v) return p->set_runtime_inputs(true);
      *parts[static_cast<size_t>(i - 1)] = *v;
    }
    if (step.inputs_size() > 1) step.mutable_inputs()->Truncate(1);
  }
  rt::cpu::nn::complete_slice_ranges(a, starts, ends, axes, steps);
  for (int64_t& axis : axes) axis = axis_of(a, in, 0, axis);
  add_all(p->mutable_starts(), starts);
  add_all(p->mutable_ends(), ends);
  add_all(p->mutable_axes(), axes);
  add_all(p->mutable_steps(), steps);
}

// Pad: the pads of each axis, from the attribute before opset 11 or the constant inputs pads
// and (opset 18) axes, which leave the step; the input's rank is the pads' count / 2 when
// shape inference did not give it.
void pad_params(const Attrs& a, plan::Step& step, const StepOperands& in, plan::PadParams* p) {
  const std::string mode = a.attr_string("mode", "constant");
  if (mode == "constant") {
    p->set_mode(plan::PadParams::CONSTANT);
  } else if (mode == "edge") {
    p->set_mode(plan::PadParams::EDGE);
  } else if (mode == "reflect") {
    p->set_mode(plan::PadParams::REFLECT);
  } else {
    a.fail("attribute 'mode' value '" + mode + "' is not supported");
  }
  std::vector<int64_t> pads, axes;
  if (a.opset() < 11) {
    pads = a.attr_ints(a.opset() < 2 ? "paddings" : "pads");
    p->set_value(a.attr_float("value", 0.0f));
  } else {
    const std::optional<std::vector<int64_t>> given = constant_input(in, 1);
    const bool axes_given = a.opset() >= 18 && has_input(step, in, 3);
    const std::optional<std::vector<int64_t>> given_axes =
        axes_given ? constant_input(in, 3) : std::nullopt;
    if (!given || (axes_given && !given_axes)) return p->set_runtime_pads(true);
    pads = *given;
    if (given_axes) axes = *given_axes;
    drop_input(step, 3);
    drop_input(step, 1);
  }
  const std::optional<int64_t> known = known_rank(in, 0);
  const int64_t rank = known ? *known : static_cast<int64_t>(pads.size()) / 2;
  std::vector<int64_t> before, after;
  rt::cpu::nn::pads_per_axis(a, pads, axes, rank, before, after);
  add_all(p->mutable_before(), before);
  add_all(p->mutable_after(), after);
}

// Scatter ops: the reduction by name (opset 16), the axis of the element-wise forms.
void scatter_params(const Attrs& a, const StepOperands& in, plan::ScatterParams* p) {
  const std::string r = a.attr_string("reduction", "none");
  std::string upper = r;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  plan::ScatterParams::Reduction reduction = plan::ScatterParams::NONE;
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    a.fail("attribute 'reduction' value '" + r + "' is not supported");
  plan::ScatterParams::Reduction_Parse(upper, &reduction);
  p->set_reduction(reduction);
  p->set_axis(axis_of(a, in, 0, a.attr_int("axis", 0)));
}

}  // namespace

void add_data_movement_fillers(Fillers& t) {
  t["Transpose"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    transpose_params(a, in, s.mutable_transpose());
  };
  t["Concat"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    // The axis is required from opset 4; before, it defaulted to 1.
    const int64_t axis = a.opset() < 4 ? a.attr_int("axis", 1) : a.attr_int("axis");
    s.mutable_axis()->set_axis(axis_of(a, in, 0, axis));
  };
  t["Gather"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    s.mutable_axis()->set_axis(axis_of(a, in, 0, a.attr_int("axis", 0)));
  };
  t["Split"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    split_params(a, s, in, s.mutable_axis());
  };
  t["Cast"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
    cast_params(a, s, s.mutable_cast());
  };
  t["Slice"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    slice_params(a, s, in, s.mutable_slice());
  };
  t["Pad"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
    pad_params(a, s, in, s.mutable_pad());
  };
  for (const char* op : {"ScatterND", "ScatterElements", "Scatter"}) {
    t[op] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      scatter_params(a, in, s.mutable_scatter());
    };
  }
  for (const char* op : {"ampc.AllReduceStart", "ampc.AllReduceWait"}) {
    t[op] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      s.mutable_all_reduce()->set_bucket(a.attr_int("bucket"));
      s.mutable_all_reduce()->set_to(static_cast<int32_t>(a.attr_int("to")));
    };
  }
}

}  // namespace ampc::lower::detail
