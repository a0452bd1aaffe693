// Data movement (Transpose, Slice, Expand, Concat, Split, Pad, DepthToSpace, SpaceToDepth),
// ConstantOfShape, Gather and ScatterND, integer and bool elementwise ops with broadcasting,
// Where, Not and Cast on the hand-written kernels (kernels/cuda), with the attributes read as
// the CPU operators read them (runtime/cpu/ops/tensor_*.cc, elementwise_*.cc). Float elementwise
// math is not here: the compiler turns it into generated kernels for CUDA targets.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "kernels/cuda/copy.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gather_scatter.h"
#include "kernels/cuda/pad.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cuda/op_builders.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cuda {
namespace {

namespace kc = kernels::cuda;
using Shape = std::vector<int64_t>;

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// out = in viewed through (offset, strides), written contiguously.
Launch strided(StepContext& ctx, const Shape& shape, int64_t offset, const Shape& strides) {
  require_same_type(ctx);
  if (numel_of(shape) != ctx.out_numel(0)) {
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " is not the computed " +
             shape_str(shape));
  }
  const DType dtype = ctx.in_dtype(0);
  const DevPtr in = ctx.in(0), out = ctx.out(0);
  const Shape dst = contiguous_strides(shape);
  return [=](cudaStream_t stream) {
    if (numel_of(shape) == 0) return;
    kc::strided_copy(dtype, shape, in.get(), offset, strides, out.get(), 0, dst, stream);
  };
}

Launch build_transpose(StepContext& ctx) {
  const Shape x = ctx.in_shape(0);
  const auto& given = plan::params<plan::TransposeParams>(ctx.step()).perm();
  Shape perm(given.begin(), given.end());
  if (perm.empty()) {
    for (size_t i = x.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != x.size()) ctx.fail("perm does not match the input's rank");
  const Shape in_strides = contiguous_strides(x);
  Shape shape, strides;
  for (int64_t p : perm) {
    const int64_t a = cpu::normalize_axis(ctx.attrs(), p, static_cast<int64_t>(x.size()));
    shape.push_back(x[static_cast<size_t>(a)]);
    strides.push_back(in_strides[static_cast<size_t>(a)]);
  }
  return strided(ctx, shape, 0, strides);
}

// DepthToSpace / SpaceToDepth: the CPU op's transpose of a 6-D view (cpu::nn::block_move), as
// one strided copy.
Launch build_block_move(StepContext& ctx, bool to_space) {
  const cpu::nn::BlockMove m = cpu::nn::block_move(ctx.attrs(), ctx.in_shape(0), to_space);
  if (m.out != ctx.out_shape(0))
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " is not " + shape_str(m.out));
  const Shape view_strides = contiguous_strides(m.view);
  Shape shape, strides;
  for (int64_t p : m.perm) {
    shape.push_back(m.view[static_cast<size_t>(p)]);
    strides.push_back(view_strides[static_cast<size_t>(p)]);
  }
  return strided(ctx, shape, 0, strides);
}

// ConstantOfShape: the plan's output buffer (shapes are static) filled with the step's value
// (FillParams); a shape input that is a constant of the plan must agree with that buffer.
Launch build_constant_of_shape(StepContext& ctx) {
  const plan::FillParams& p = plan::params<plan::FillParams>(ctx.step());
  const std::optional<DType> known = plan::fill_dtype(p);
  if (!known) ctx.fail("the fill value is not one element of a known numeric type");
  const DType dtype = *known;
  if (ctx.out_dtype(0) != dtype)
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " is not of the value's type");
  const plan::Buffer& shape = ctx.input(0);
  if (shape.role() == plan::CONSTANT && shape.has_initial() &&
      ctx.constant_ints(0, "the shape") != ctx.out_shape(0))
    ctx.fail("the output " + describe_buffer(ctx.output(0)) + " does not have the given shape");
  const std::string value = p.value();
  const DevPtr out = ctx.out(0);
  const int64_t numel = ctx.out_numel(0);
  return [=](cudaStream_t stream) { kc::fill(dtype, value.data(), out.get(), numel, stream); };
}

Launch build_slice(StepContext& ctx) {
  const Shape x = ctx.in_shape(0);
  const auto& a = ctx.attrs();
  const plan::SliceParams& p = plan::params<plan::SliceParams>(ctx.step());
  if (p.runtime_inputs())
    ctx.fail("its starts, ends, axes or steps are computed at run time (the CPU backend only)");
  const Shape starts(p.starts().begin(), p.starts().end()), ends(p.ends().begin(), p.ends().end()),
      axes(p.axes().begin(), p.axes().end()), steps(p.steps().begin(), p.steps().end());
  Shape shape = x;
  const Shape in_strides = contiguous_strides(x);
  Shape strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto ax =
        static_cast<size_t>(cpu::normalize_axis(a, axes[i], static_cast<int64_t>(x.size())));
    const int64_t dim = x[ax], step = steps[i];
    if (step == 0) ctx.fail("slice step is 0");
    const cpu::nn::SliceAxis r = cpu::nn::slice_axis(starts[i], ends[i], step, dim);
    shape[ax] = r.count;
    if (shape[ax] > 0) offset += r.start * in_strides[ax];
    strides[ax] = in_strides[ax] * step;
  }
  return strided(ctx, shape, offset, strides);
}

Launch build_expand(StepContext& ctx) {
  const Shape x = ctx.in_shape(0), y = ctx.out_shape(0);
  if (x.size() > y.size()) ctx.fail("the output has a lower rank than the input");
  const Shape in_strides = contiguous_strides(x);
  Shape strides(y.size(), 0);
  const size_t lead = y.size() - x.size();
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[lead + i] && x[i] != 1) ctx.fail("the input does not broadcast to the output");
    strides[lead + i] = x[i] == 1 ? 0 : in_strides[i];
  }
  return strided(ctx, y, 0, strides);
}

Launch build_concat(StepContext& ctx) {
  const Shape y = ctx.out_shape(0);
  const auto axis = static_cast<size_t>(
      cpu::normalize_axis(ctx.attrs(), plan::params<plan::AxisParams>(ctx.step()).axis(),
                          static_cast<int64_t>(y.size())));
  const int64_t outer = product(y, 0, axis), inner = product(y, axis + 1, y.size());
  const DType dtype = ctx.out_dtype(0);
  std::vector<DevPtr> ins;
  Shape sizes;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (ctx.in_dtype(k) != dtype) ctx.fail("inputs of different types");
    const Shape s = ctx.in_shape(k);
    if (s.size() != y.size()) ctx.fail("inputs of different ranks");
    sizes.push_back(s[axis]);
    ins.push_back(ctx.in(k));
  }
  const DevPtr out = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (outer * inner == 0) return;
    kc::concat(dtype, addresses<const void*>(ins), sizes, outer, inner, out.get(), stream);
  };
}

Launch build_split(StepContext& ctx) {
  const Shape x = ctx.in_shape(0);
  const auto axis = static_cast<size_t>(
      cpu::normalize_axis(ctx.attrs(), plan::params<plan::AxisParams>(ctx.step()).axis(),
                          static_cast<int64_t>(x.size())));
  const int64_t outer = product(x, 0, axis), inner = product(x, axis + 1, x.size());
  const DType dtype = ctx.in_dtype(0);
  Shape sizes;
  std::vector<DevPtr> outs;
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    if (ctx.out_dtype(k) != dtype) ctx.fail("outputs of another type than the input");
    sizes.push_back(ctx.out_shape(k).at(axis));
    outs.push_back(ctx.out(k));
  }
  const DevPtr in = ctx.in(0);
  return [=](cudaStream_t stream) {
    if (outer * inner == 0) return;
    kc::split(dtype, in.get(), outer, inner, sizes, addresses<void*>(outs), stream);
  };
}

Launch build_pad(StepContext& ctx) {
  const auto& a = ctx.attrs();
  const Shape x = ctx.in_shape(0);
  const plan::PadParams& p = plan::params<plan::PadParams>(ctx.step());
  if (p.runtime_pads()) ctx.fail("its pads are computed at run time (the CPU backend only)");
  const kc::PadMode mode = p.mode() == plan::PadParams::EDGE      ? kc::PadMode::kEdge
                           : p.mode() == plan::PadParams::REFLECT ? kc::PadMode::kReflect
                                                                  : kc::PadMode::kConstant;
  const Shape before(p.before().begin(), p.before().end()),
      after(p.after().begin(), p.after().end());
  if (before.size() != x.size()) ctx.fail("pads of another rank than the input");
  Shape shape(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    shape[d] = x[d] + before[d] + after[d];
    if (shape[d] < 0) ctx.fail("pads remove more than the whole axis " + std::to_string(d));
    if (mode != kc::PadMode::kConstant && x[d] == 0 && shape[d] > 0)
      ctx.fail(std::string("cannot ") + (mode == kc::PadMode::kEdge ? "edge" : "reflect") +
               "-pad an empty axis");
  }
  if (shape != ctx.out_shape(0)) ctx.fail("the output is not the padded shape " + shape_str(shape));
  require_same_type(ctx);
  const DType dtype = ctx.in_dtype(0);
  const bool has_value = a.opset() >= 11 && ctx.has_input(2) && ctx.in_numel(2) > 0;
  if (has_value && ctx.in_dtype(2) != dtype)
    ctx.fail("constant_value has another type than the data");
  const float fill = a.opset() < 11 ? p.value() : 0.0f;
  const DevPtr in = ctx.in(0), out = ctx.out(0), value = has_value ? ctx.in(2) : DevPtr{};
  return [=](cudaStream_t stream) {
    if (numel_of(shape) == 0) return;
    kc::pad(dtype, in.get(), x, before, after, mode, value.get(), fill, out.get(), stream);
  };
}

constexpr const char* kIndexOutOfRange =
    "an index is out of range (the kernel clamped it; the CPU backend refuses such an index)";

Launch build_gather(StepContext& ctx) {
  const Shape x = ctx.in_shape(0);
  const auto axis = static_cast<size_t>(
      cpu::normalize_axis(ctx.attrs(), plan::params<plan::AxisParams>(ctx.step()).axis(),
                          static_cast<int64_t>(x.size())));
  ctx.require_dtype(1, {DType::kInt32, DType::kInt64});
  require_same_type(ctx);
  const int64_t outer = product(x, 0, axis), dim = x[axis], inner = product(x, axis + 1, x.size());
  const int64_t count = ctx.in_numel(1);
  if (outer * count * inner != ctx.out_numel(0)) ctx.fail("the output does not fit the gather");
  const DType dtype = ctx.in_dtype(0), index_t = ctx.in_dtype(1);
  const DevPtr data = ctx.in(0), indices = ctx.in(1), out = ctx.out(0);
  const FlagPtr bad = ctx.error_flag(kIndexOutOfRange);
  return [=](cudaStream_t stream) {
    if (outer * count * inner == 0) return;
    kc::gather(dtype, data.get(), outer, dim, inner, index_t, indices.get(), count, out.get(),
               bad.get(), stream);
  };
}

Launch build_scatter_nd(StepContext& ctx) {
  const Shape data = ctx.in_shape(0), idx = ctx.in_shape(1);
  ctx.require_dtype(1, {DType::kInt32, DType::kInt64});
  require_same_type(ctx);
  if (idx.empty()) ctx.fail("indices must have at least one dimension");
  const int64_t depth = idx.back(), tuples = numel_of(idx) / std::max<int64_t>(depth, 1);
  if (depth < 1 || depth > static_cast<int64_t>(data.size())) ctx.fail("bad index depth");
  if (ctx.in_dtype(2) != ctx.in_dtype(0)) ctx.fail("updates have another type than the data");
  static_assert(static_cast<int>(kc::ScatterReduction::kAdd) == plan::ScatterParams::ADD &&
                static_cast<int>(kc::ScatterReduction::kMin) == plan::ScatterParams::MIN);
  const auto reduction =
      static_cast<kc::ScatterReduction>(plan::params<plan::ScatterParams>(ctx.step()).reduction());
  const WorkspacePtr ws =
      ctx.workspace(static_cast<int64_t>(kc::scatter_nd_workspace_bytes(data, tuples, depth)));
  const DType dtype = ctx.in_dtype(0), index_t = ctx.in_dtype(1);
  const DevPtr d = ctx.in(0), indices = ctx.in(1), updates = ctx.in(2), out = ctx.out(0);
  if (ctx.input(0).region() == ctx.output(0).region() &&
      ctx.input(0).offset() == ctx.output(0).offset())
    ctx.fail("the memory plan puts the output in the data's storage, which ScatterND cannot do");
  const FlagPtr bad = ctx.error_flag(kIndexOutOfRange);
  return [=](cudaStream_t stream) {
    kc::scatter_nd(dtype, d.get(), data, index_t, indices.get(), tuples, depth, updates.get(),
                   reduction, out.get(), ws.get(), bad.get(), stream);
  };
}

const std::map<std::string, kc::BinaryOp>& binary_ops() {
  static const std::map<std::string, kc::BinaryOp> ops = {
      {"Add", kc::BinaryOp::kAdd},
      {"Sub", kc::BinaryOp::kSub},
      {"Mul", kc::BinaryOp::kMul},
      {"Div", kc::BinaryOp::kDiv},
      {"Equal", kc::BinaryOp::kEqual},
      {"Less", kc::BinaryOp::kLess},
      {"Greater", kc::BinaryOp::kGreater},
      {"LessOrEqual", kc::BinaryOp::kLessOrEqual},
      {"GreaterOrEqual", kc::BinaryOp::kGreaterOrEqual},
      {"And", kc::BinaryOp::kAnd},
      {"Or", kc::BinaryOp::kOr},
      {"Xor", kc::BinaryOp::kXor}};
  return ops;
}

Launch build_binary(StepContext& ctx) {
  const std::string& name = ctx.step().op();
  const kc::BinaryOp op = binary_ops().at(name);
  const DType t = ctx.in_dtype(0);
  if (ctx.in_dtype(1) != t) ctx.fail("operands of different types");
  const bool logical =
      op == kc::BinaryOp::kAnd || op == kc::BinaryOp::kOr || op == kc::BinaryOp::kXor;
  const bool integer =
      t == DType::kInt32 || t == DType::kInt64 || t == DType::kInt8 || t == DType::kUInt8;
  const bool ok =
      logical ? t == DType::kBool : integer || (op == kc::BinaryOp::kEqual && t == DType::kBool);
  if (!ok) {
    ctx.fail(name + " of " + std::string(dtype_name(t)) +
             " has no CUDA kernel (float elementwise ops run as generated kernels: compile the "
             "plan for a cuda target with fusion on)");
  }
  const Shape as = ctx.in_shape(0), bs = ctx.in_shape(1), ys = ctx.out_shape(0);
  const DevPtr a = ctx.in(0), b = ctx.in(1), y = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (numel_of(ys) == 0) return;
    kc::binary(op, t, a.get(), as, b.get(), bs, y.get(), ys, stream);
  };
}

Launch build_where(StepContext& ctx) {
  if (ctx.in_dtype(0) != DType::kBool) ctx.fail("the condition must be bool");
  const DType t = ctx.in_dtype(1);
  if (ctx.in_dtype(2) != t || ctx.out_dtype(0) != t)
    ctx.fail("X, Y and the output must share a type");
  const size_t size = dtype_size(t);
  if (size != 1 && size != 2 && size != 4 && size != 8)
    ctx.fail("elements of " + std::to_string(size) + " bytes are not supported");
  const Shape cs = ctx.in_shape(0), xs = ctx.in_shape(1), ysh = ctx.in_shape(2),
              os = ctx.out_shape(0);
  const DevPtr c = ctx.in(0), x = ctx.in(1), y = ctx.in(2), out = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (numel_of(os) == 0) return;
    kc::where(t, static_cast<const bool*>(c.get()), cs, x.get(), xs, y.get(), ysh, out.get(), os,
              stream);
  };
}

Launch build_not(StepContext& ctx) {
  if (ctx.in_dtype(0) != DType::kBool || ctx.out_dtype(0) != DType::kBool)
    ctx.fail("Not takes and gives bool");
  const int64_t n = ctx.in_numel(0);
  const DevPtr in = ctx.in(0), out = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (n > 0)
      kc::logical_not(static_cast<const bool*>(in.get()), static_cast<bool*>(out.get()), n, stream);
  };
}

Launch build_cast(StepContext& ctx) {
  const DType from = ctx.in_dtype(0), to = ctx.out_dtype(0);
  if (static_cast<int32_t>(to) != plan::params<plan::CastParams>(ctx.step()).to())
    ctx.fail("the output's type is not 'to'");
  for (DType t : {from, to}) {
    static const std::initializer_list<DType> ok = {
        DType::kBool,     DType::kInt32,   DType::kInt64,  DType::kFloat16,
        DType::kBFloat16, DType::kFloat32, DType::kFloat64};
    if (std::find(ok.begin(), ok.end(), t) == ok.end())
      ctx.fail("Cast involving " + std::string(dtype_name(t)) + " has no CUDA kernel");
  }
  const int64_t n = ctx.in_numel(0);
  const DevPtr in = ctx.in(0), out = ctx.out(0);
  return [=](cudaStream_t stream) {
    if (n == 0) return;
    if (from == to) {
      kc::contiguous_copy(from, in.get(), out.get(), n, stream);
    } else {
      kc::cast(from, to, in.get(), out.get(), n, stream);
    }
  };
}

}  // namespace

void register_tensor_ops(BuilderTable& t) {
  t.add("", "Transpose", build_transpose);
  t.add("", "Slice", build_slice);
  t.add("", "ConstantOfShape", build_constant_of_shape);
  t.add("", "DepthToSpace", [](StepContext& ctx) { return build_block_move(ctx, true); });
  t.add("", "SpaceToDepth", [](StepContext& ctx) { return build_block_move(ctx, false); });
  t.add("", "Expand", build_expand);
  t.add("", "Concat", build_concat);
  t.add("", "Split", build_split);
  t.add("", "Pad", build_pad);
  t.add("", "Gather", build_gather);
  t.add("", "ScatterND", build_scatter_nd);
  for (const auto& [name, op] : binary_ops()) t.add("", name, build_binary);
  t.add("", "Where", build_where);
  t.add("", "Not", build_not);
  t.add("", "Cast", build_cast);
}

}  // namespace ampc::rt::cuda
