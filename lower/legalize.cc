#include "lower/legalize.h"

#include "lower/legalize_parts.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "runtime/cpu/op_context.h"
#include "runtime/cpu/ops/nn_util.h"

namespace ampc::lower {
namespace {

using plan::RowwiseParams;

using detail::Attrs;

int64_t rank_of(const Attrs& a, const StepOperands& in, int input) {
  if (input >= static_cast<int>(in.input_ranks.size()) || !in.input_ranks[input])
    a.fail("the rank of input " + std::to_string(input) + " is not known at compile time");
  return *in.input_ranks[input];
}

// Softmax, LogSoftmax, Hardmax: before opset 13 the input is coerced to 2-D at `axis`
// (default 1, which may equal the rank: rows of one element); from 13 one axis (default -1).
void softmax_params(const Attrs& a, const StepOperands& in, RowwiseParams::Kind kind,
                    RowwiseParams* p) {
  const int64_t rank = rank_of(a, in, 0);
  p->set_kind(kind);
  const bool coerce_2d = a.opset() < 13;
  int64_t axis = a.attr_int("axis", coerce_2d ? 1 : -1);
  if (rank == 0) {  // a single value: one row of one element
    p->set_axis(0);
    p->set_flatten(true);
    return;
  }
  if (coerce_2d && axis < 0) axis += rank;
  p->set_axis(coerce_2d && axis == rank ? rank : rt::cpu::normalize_axis(a, axis, rank));
  p->set_flatten(coerce_2d);
}

// ampc.SoftmaxGrad(dY, Y; axis, log): the forward's kind and its one axis (opset 13 and later).
void softmax_grad_params(const Attrs& a, const StepOperands& in, RowwiseParams* p) {
  const int64_t rank = rank_of(a, in, 1);
  p->set_kind(a.attr_int("log", 0) ? RowwiseParams::LOG_SOFTMAX : RowwiseParams::SOFTMAX);
  p->set_axis(rank == 0 ? 0 : rt::cpu::normalize_axis(a, a.attr_int("axis", -1), rank));
  p->set_flatten(rank == 0);
}

// LayerNormalization, and its backward (x_input 1, no stash_type).
void layer_norm_params(const Attrs& a, const StepOperands& in, RowwiseParams* p, int x_input = 0) {
  p->set_kind(RowwiseParams::LAYER_NORM);
  p->set_axis(rt::cpu::normalize_axis(a, a.attr_int("axis", -1), rank_of(a, in, x_input)));
  p->set_flatten(true);
  p->set_epsilon(a.attr_float("epsilon", 1e-5f));
  const int64_t stash = a.attr_int("stash_type", 1);
  if (!is_float(static_cast<DType>(stash))) a.fail("attribute 'stash_type' must name a float type");
  p->set_stash_type(static_cast<int32_t>(stash));
}

void instance_norm_params(const Attrs& a, const StepOperands& in, RowwiseParams* p) {
  if (rank_of(a, in, 0) < 3) a.fail("the input has no spatial dimension");
  p->set_kind(RowwiseParams::INSTANCE_NORM);
  p->set_axis(2);
  p->set_flatten(true);
  p->set_epsilon(a.attr_float("epsilon", 1e-5f));
}

// LpNormalization: one axis (default -1, no flattening: the norm runs along that axis only),
// p 1 or 2 (default 2; the ONNX definition allows no other).
void lp_norm_params(const Attrs& a, const StepOperands& in, RowwiseParams* p) {
  const int64_t rank = rank_of(a, in, 0);
  if (rank == 0) a.fail("the input is a scalar: there is no axis to normalise along");
  p->set_kind(RowwiseParams::LP_NORM);
  p->set_axis(rt::cpu::normalize_axis(a, a.attr_int("axis", -1), rank));
  p->set_flatten(false);
  const int64_t order = a.attr_int("p", 2);
  if (order != 1 && order != 2)
    a.fail("attribute 'p' is " + std::to_string(order) + "; the ONNX definition allows 1 and 2");
  p->set_p(static_cast<int32_t>(order));
}

const std::map<std::string, plan::ReduceParams::Kind>& reduce_kinds() {
  using K = plan::ReduceParams;
  static const std::map<std::string, K::Kind> kinds = {{"ReduceSum", K::SUM},
                                                       {"ReduceMean", K::MEAN},
                                                       {"ReduceProd", K::PROD},
                                                       {"ReduceMax", K::MAX},
                                                       {"ReduceMin", K::MIN},
                                                       {"ReduceL1", K::L1},
                                                       {"ReduceL2", K::L2},
                                                       {"ReduceLogSum", K::LOG_SUM},
                                                       {"ReduceLogSumExp", K::LOG_SUM_EXP},
                                                       {"ReduceSumSquare", K::SUM_SQUARE}};
  return kinds;
}

// Axes: an input from ReduceSum-13 (and every Reduce op from opset 18), else an attribute.
// A constant input's values move into the parameters (and the input leaves the step); axes
// computed at run time stay an input the CPU backend reads.
void reduce_params(const Attrs& a, plan::Step& step, const StepOperands& in,
                   plan::ReduceParams* p) {
  const int64_t rank = rank_of(a, in, 0);
  p->set_kind(reduce_kinds().at(step.op()));
  p->set_keep_dims(a.attr_int("keepdims", 1) != 0);
  p->set_noop_with_empty_axes(a.attr_int("noop_with_empty_axes", 0) != 0);
  std::vector<int64_t> axes = a.attr_ints("axes");
  const bool axes_input = (step.inputs_size() > 1 && step.inputs(1) >= 0) ||
                          (in.input_ranks.size() > 1 && in.input_ranks[1]);
  if (axes_input) {
    std::optional<std::vector<int64_t>> values;
    if (in.constant_ints) values = in.constant_ints(1);
    if (!values) {
      p->set_runtime_axes(true);
      return;
    }
    axes = *values;
    if (step.inputs_size() > 1) step.mutable_inputs()->Truncate(1);
  }
  for (int64_t& axis : axes) axis = rt::cpu::normalize_axis(a, axis, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (int64_t axis : axes) p->add_axes(axis);
}

// Before opset 14 training mode is implied by asking for the running statistics, and the
// batch statistics are outputs 3 and 4; from 14 it is the training_mode attribute.
void batch_norm_params(const Attrs& a, const plan::Step& step, const StepOperands& in,
                       plan::BatchNormParams* p) {
  if (rank_of(a, in, 0) < 2) a.fail("the input has no channel dimension");
  if (a.attr_int("spatial", 1) != 1) a.fail("attribute 'spatial' value 0 is not supported");
  auto has_output = [&](int i) { return step.outputs_size() > i && step.outputs(i) >= 0; };
  const bool before_14 = a.opset() < 14;
  p->set_training(before_14 ? has_output(1) || has_output(2) : a.attr_int("training_mode", 0) != 0);
  p->set_saved_statistics(before_14 && (has_output(3) || has_output(4)));
  p->set_epsilon(a.attr_float("epsilon", 1e-5f));
  p->set_momentum(a.attr_float("momentum", 0.9f));
}

void cross_entropy_params(const Attrs& a, plan::CrossEntropyParams* p) {
  using P = plan::CrossEntropyParams;
  const std::string reduction = a.attr_string("reduction", "mean");
  if (reduction == "mean") {
    p->set_reduction(P::MEAN);
  } else if (reduction == "sum") {
    p->set_reduction(P::SUM);
  } else if (reduction == "none") {
    p->set_reduction(P::NONE);
  } else {
    a.fail("attribute 'reduction' value '" + reduction + "' is not supported");
  }
  p->set_has_ignore_index(a.has_attr("ignore_index"));
  p->set_ignore_index(a.attr_int("ignore_index", 0));
}

// The windowed ops: which input is X, and which of the window's optional fields apply.
struct WindowOp {
  int x_input;
  bool pooling, average, max, conv, lp, global = false;
};

const std::map<std::string, WindowOp>& window_ops() {
  static const std::map<std::string, WindowOp> ops = {
      {"MaxPool", {0, true, false, true, false, false}},
      {"AveragePool", {0, true, true, false, false, false}},
      {"LpPool", {0, true, false, false, false, true}},
      {"GlobalLpPool", {0, true, false, false, false, true, true}},
      {"Conv", {0, false, false, false, true, false}},
      {"ConvInteger", {0, false, false, false, true, false}},
      {"ampc.Conv", {0, false, false, false, true, false}},
      {"ampc.MaxPool", {0, true, false, true, false, false}},
      {"ampc.AveragePool", {0, true, true, false, false, false}},
      {"ampc.ConvGrad", {1, false, false, false, true, false}},
      {"ampc.MaxPoolGrad", {1, true, false, true, false, false}},
      {"ampc.AveragePoolGrad", {1, true, true, false, false, false}}};
  return ops;
}

std::string op_key(const std::string& domain, const std::string& op) {
  return domain.empty() || domain == "ai.onnx" ? op : domain + "." + op;
}

plan::WindowParams::AutoPad auto_pad_of(const Attrs& a) {
  using W = plan::WindowParams;
  const std::string v = a.attr_string("auto_pad", "NOTSET");
  if (v == "NOTSET") return W::NOTSET;
  if (v == "VALID") return W::VALID;
  if (v == "SAME_UPPER") return W::SAME_UPPER;
  if (v == "SAME_LOWER") return W::SAME_LOWER;
  a.fail("attribute 'auto_pad' value '" + v + "' is not supported");
}

// kernel_shape (required for pooling; a convolution's defaults to its weights' at run time),
// strides, dilations and pads with ONNX's defaults, one per spatial axis.
void window_params(const Attrs& a, const WindowOp& op, const StepOperands& in,
                   plan::WindowParams* p) {
  if (op.lp) {
    p->set_p(a.attr_int("p", 2));
    if (p->p() <= 0) a.fail("attribute 'p' must be positive");
  }
  if (op.global) return;  // one window over the whole plane: only the norm
  const int64_t rank = rank_of(a, in, op.x_input);
  rt::cpu::nn::check_spatial_rank(a, rank);
  const auto n = static_cast<size_t>(rank - 2);
  if (op.pooling && !a.has_attr("kernel_shape")) a.fail("attribute 'kernel_shape' is required");
  const std::vector<int64_t> kernel = a.attr_ints("kernel_shape");
  const auto strides = a.attr_ints("strides", std::vector<int64_t>(n, 1));
  const auto dilations = a.attr_ints("dilations", std::vector<int64_t>(n, 1));
  const auto pads = a.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if ((!kernel.empty() && kernel.size() != n) || strides.size() != n || dilations.size() != n ||
      pads.size() != 2 * n) {
    a.fail("kernel_shape, strides, dilations or pads do not match the " + std::to_string(n) +
           " spatial dimensions of the input");
  }
  for (size_t i = 0; i < n; ++i) {
    if ((!kernel.empty() && kernel[i] <= 0) || strides[i] <= 0 || dilations[i] <= 0)
      a.fail("kernel_shape, strides and dilations must be positive");
  }
  p->mutable_kernel()->Add(kernel.begin(), kernel.end());
  p->mutable_strides()->Add(strides.begin(), strides.end());
  p->mutable_dilations()->Add(dilations.begin(), dilations.end());
  p->mutable_pads()->Add(pads.begin(), pads.end());
  p->set_auto_pad(auto_pad_of(a));
  p->set_ceil_mode(op.pooling && a.attr_int("ceil_mode", 0) != 0);
  p->set_count_include_pad(op.average && a.attr_int("count_include_pad", 0) != 0);
  p->set_column_major_indices(op.max && a.attr_int("storage_order", 0) == 1);
  if (op.conv) {
    p->set_group(a.attr_int("group", 1));
    if (p->group() <= 0) a.fail("attribute 'group' must be positive");
  }
}

// ConvTranspose: the window of the convolution it transposes (kernel_shape defaulting to the
// weights'), the output padding, and the output's spatial sizes when the node fixes them
// (output_shape may also list N and C: the last n are kept).
void conv_transpose_params(const Attrs& a, const StepOperands& in, plan::WindowParams* p) {
  window_params(a, {0, false, false, false, true, false}, in, p);
  const auto n = static_cast<size_t>(p->strides_size());
  const auto out_pad = a.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  auto out_shape = a.attr_ints("output_shape");
  if (out_shape.size() == n + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (out_pad.size() != n || (!out_shape.empty() && out_shape.size() != n)) {
    a.fail("output_padding or output_shape do not match the " + std::to_string(n) +
           " spatial dimensions of the input");
  }
  for (size_t i = 0; i < n; ++i) {
    if (out_pad[i] < 0 || (!out_shape.empty() && out_shape[i] < 0))
      a.fail("output_padding and output_shape must not be negative");
  }
  p->mutable_output_padding()->Add(out_pad.begin(), out_pad.end());
  p->mutable_output_shape()->Add(out_shape.begin(), out_shape.end());
}

// DepthToSpace (its mode: DCR by default) and SpaceToDepth (no mode).
void block_params(const Attrs& a, bool depth_to_space, plan::BlockParams* p) {
  p->set_blocksize(a.attr_int("blocksize"));
  if (p->blocksize() <= 0) a.fail("attribute 'blocksize' must be positive");
  if (!depth_to_space) return;
  const std::string mode = a.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    a.fail("attribute 'mode' value '" + mode + "' is not supported");
  p->set_crd(mode == "CRD");
}

// ConstantOfShape: the value attribute (one element of any non-string type), fp32 0 without it.
void fill_params(const Attrs& a, plan::FillParams* p) {
  std::optional<rt::Tensor> value = a.attr_tensor("value");
  if (!value) value = rt::Tensor(DType::kFloat32, {1});
  if (value->numel() != 1 || value->dtype() == DType::kString)
    a.fail("attribute 'value' must hold one number");
  p->set_dtype(static_cast<int32_t>(value->dtype()));
  p->set_value(std::string(static_cast<const char*>(value->raw()), dtype_size(value->dtype())));
}

// The loss scaler's update: torch's defaults (GradScaler), optional bounds.
void scale_update_params(const Attrs& a, plan::ScaleUpdateParams* p) {
  p->set_growth_factor(a.attr_float("growth_factor", 2.0f));
  p->set_backoff_factor(a.attr_float("backoff_factor", 0.5f));
  p->set_growth_interval(a.attr_int("growth_interval", 2000));
  if (p->growth_interval() < 1)
    a.fail("growth_interval must be at least 1, got " + std::to_string(p->growth_interval()));
  p->set_has_min_scale(a.has_attr("min_scale"));
  p->set_min_scale(a.attr_float("min_scale", 0));
  p->set_has_max_scale(a.has_attr("max_scale"));
  p->set_max_scale(a.attr_float("max_scale", 0));
}

// Dropout: from opset 12 the ratio and training_mode are inputs; before, the ratio is an
// attribute and the op the identity (an inference op); the mask is bool from opset 10.
void dropout_params(const Attrs& a, plan::DropoutParams* p) {
  const bool inputs = a.opset() >= 12;
  p->set_default_ratio(inputs ? 0.5f : a.attr_float("ratio", 0.5f));
  p->set_mode_inputs(inputs);
  p->set_mask_bool(a.opset() >= 10);
  p->set_seeded(a.has_attr("seed"));
  p->set_seed(a.attr_int("seed", 0));
}

void clip_params(const Attrs& a, plan::ClipParams* p) {
  p->set_clip(a.has_attr("max_norm"));
  p->set_max_norm(a.attr_float("max_norm", 0));
}

// Gemm: its transposes and scales (ONNX's defaults: none, 1, 1). Before opset 7 C broadcast
// only with `broadcast` set; a C that the output's shape does not take is refused by the
// backends either way, so the attribute says nothing more. MatMul: alpha 1, no C.
void gemm_params(const Attrs& a, const plan::Step& step, plan::GemmParams* p) {
  const bool gemm = step.op() == "Gemm";
  p->set_trans_a(gemm && a.attr_int("transA", 0) != 0);
  p->set_trans_b(gemm && a.attr_int("transB", 0) != 0);
  p->set_alpha(gemm ? a.attr_float("alpha", 1.0f) : 1.0f);
  p->set_beta(gemm ? a.attr_float("beta", 1.0f) : 0.0f);
}

// What fills each op's parameters, by op_key: the one list of the ops that have them.
const detail::Fillers& fillers() {
  static const detail::Fillers table = [] {
    detail::Fillers t;
    detail::add_data_movement_fillers(t);
    for (const auto& [op, kind] : {std::pair{"Softmax", RowwiseParams::SOFTMAX},
                                   std::pair{"LogSoftmax", RowwiseParams::LOG_SOFTMAX},
                                   std::pair{"Hardmax", RowwiseParams::HARDMAX}}) {
      t[op] = [kind](const Attrs& a, plan::Step& s, const StepOperands& in) {
        softmax_params(a, in, kind, s.mutable_rowwise());
      };
    }
    t["LayerNormalization"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      layer_norm_params(a, in, s.mutable_rowwise());
    };
    t["ampc.SoftmaxGrad"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      softmax_grad_params(a, in, s.mutable_rowwise());
    };
    t["ampc.LayerNormalizationGrad"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      layer_norm_params(a, in, s.mutable_rowwise(), 1);
    };
    t["InstanceNormalization"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      instance_norm_params(a, in, s.mutable_rowwise());
    };
    t["LpNormalization"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      lp_norm_params(a, in, s.mutable_rowwise());
    };
    t["BatchNormalization"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      batch_norm_params(a, s, in, s.mutable_batch_norm());
    };
    // The backward of training mode: only the epsilon.
    t["ampc.BatchNormalizationGrad"] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
      if (rank_of(a, in, 1) < 2) a.fail("the input has no channel dimension");
      s.mutable_batch_norm()->set_training(true);
      s.mutable_batch_norm()->set_epsilon(a.attr_float("epsilon", 1e-5f));
    };
    for (const char* op :
         {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "ampc.SoftmaxCrossEntropyLoss"}) {
      t[op] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
        cross_entropy_params(a, s.mutable_cross_entropy());
      };
    }
    for (const auto& entry : reduce_kinds()) {
      t[entry.first] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
        reduce_params(a, s, in, s.mutable_reduce());
      };
    }
    for (const auto& [key, op] : window_ops()) {
      t[key] = [op](const Attrs& a, plan::Step& s, const StepOperands& in) {
        window_params(a, op, in, s.mutable_window());
      };
    }
    for (const char* op : {"MatMul", "Gemm"}) {
      t[op] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
        gemm_params(a, s, s.mutable_gemm());
      };
    }
    for (const char* op : {"ConvTranspose", "ampc.ConvTranspose"}) {
      t[op] = [](const Attrs& a, plan::Step& s, const StepOperands& in) {
        conv_transpose_params(a, in, s.mutable_window());
      };
    }
    t["DepthToSpace"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      block_params(a, true, s.mutable_block());
    };
    t["SpaceToDepth"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      block_params(a, false, s.mutable_block());
    };
    t["ConstantOfShape"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      fill_params(a, s.mutable_fill());
    };
    t["Dropout"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      dropout_params(a, s.mutable_dropout());
    };
    t["ampc.UpdateScale"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      scale_update_params(a, s.mutable_scale_update());
    };
    t["ampc.ClipGradNorm"] = [](const Attrs& a, plan::Step& s, const StepOperands&) {
      clip_params(a, s.mutable_clip());
    };
    return t;
  }();
  return table;
}

}  // namespace

bool has_typed_params(const std::string& domain, const std::string& op) {
  return fillers().count(op_key(domain, op)) > 0;
}

void legalize_step(plan::Step& step, const StepOperands& operands) {
  const auto filler = fillers().find(op_key(step.domain(), step.op()));
  if (filler == fillers().end()) return;
  filler->second(Attrs(step, {}, {}), step, operands);
  step.clear_attributes();
}

void legalize_for_tensors(plan::Step& step, const std::vector<const rt::Tensor*>& inputs,
                          int num_outputs) {
  StepOperands operands;
  for (const rt::Tensor* t : inputs)
    operands.input_ranks.push_back(t ? std::optional<int64_t>(t->rank()) : std::nullopt);
  // Every given input is data here: a Reduce op's axes are read as the CPU op reads them.
  operands.constant_ints = [&](int i) -> std::optional<std::vector<int64_t>> {
    if (i >= static_cast<int>(inputs.size()) || !inputs[i]) return std::nullopt;
    return rt::cpu::int_values(rt::cpu::OpContext(step, inputs, {}), i);
  };
  if (step.outputs_size() == 0) {
    for (int i = 0; i < num_outputs; ++i) step.add_outputs(i);
  }
  legalize_step(step, operands);
}

namespace detail {

std::optional<int64_t> known_rank(const StepOperands& in, int input) {
  return input < static_cast<int>(in.input_ranks.size()) ? in.input_ranks[input] : std::nullopt;
}

bool has_input(const plan::Step& step, const StepOperands& in, int input) {
  return (step.inputs_size() > input && step.inputs(input) >= 0) || known_rank(in, input);
}

}  // namespace detail

}  // namespace ampc::lower
