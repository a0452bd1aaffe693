#include "runtime/cpu/ops/nn_util.h"

#include <algorithm>

#include <cmath>

#include "kernels/cpu/elementwise.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {

namespace k = kernels::cpu;

Tensor convert_float(const Tensor& t, DType to) {
  Tensor out(to, t.shape());
  // One pass over the buffer (threaded when large): exact loads, one rounding at the store,
  // also from fp64 to 16-bit (kernels::cpu::store rounds to odd first, so no double rounding).
  bool to_ok = true;
  const bool from_ok = k::visit_dtype<k::kFloats>(t.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    to_ok = k::visit_dtype<k::kFloats>(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      k::unary_map(t.data<From>(), out.data<To>(), t.numel(), [](auto v) { return v; });
    });
  });
  if (!from_ok) throw Error("internal: convert_float from " + t.type_str());
  if (!to_ok) throw Error("internal: convert_float to " + std::string(dtype_name(to)));
  return out;
}

void run_widened(OpContext& ctx, OpFn op, const std::vector<int>& out_like) {
  const DType compute = ctx.in(0).dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  auto needs = [&](const Tensor* t) { return t && is_float(t->dtype()) && t->dtype() != compute; };
  bool any = false;
  for (int i = 0; i < ctx.num_inputs(); ++i) any = any || needs(ctx.input(i));
  if (!any) return op(ctx);

  std::vector<Tensor> widened(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs());
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (needs(t)) {
      widened[i] = convert_float(*t, compute);
      t = &widened[i];
    }
    inputs[i] = t;
  }
  std::vector<Tensor> results(ctx.num_outputs());
  std::vector<Tensor*> outputs(ctx.num_outputs());
  for (int i = 0; i < ctx.num_outputs(); ++i)
    outputs[i] = ctx.has_output(i) ? &results[i] : nullptr;
  OpContext inner(ctx.step(), std::move(inputs), std::move(outputs));
  inner.set_random_key(ctx.random_key());
  op(inner);

  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    const int like = i < static_cast<int>(out_like.size()) ? out_like[i] : 0;
    const Tensor* src = like >= 0 ? ctx.input(like) : nullptr;
    if (src && results[i].dtype() == compute && is_float(src->dtype()) && src->dtype() != compute) {
      ctx.set_output(i, convert_float(results[i], src->dtype()));
    } else {
      ctx.set_output(i, std::move(results[i]));
    }
  }
}

void add_widened(OpRegistry& r, const std::string& name, OpFn op, std::vector<int> out_like,
                 const std::string& domain) {
  r.add(
      name,
      [op, out_like = std::move(out_like)](OpContext& ctx) { run_widened(ctx, op, out_like); },
      domain);
}

void complete_slice_ranges(const OpContext& ctx, const std::vector<int64_t>& starts,
                           const std::vector<int64_t>& ends, std::vector<int64_t>& axes,
                           std::vector<int64_t>& steps) {
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps have different lengths");
  if (std::find(steps.begin(), steps.end(), 0) != steps.end()) ctx.fail("slice step is 0");
}

void pads_per_axis(const OpContext& ctx, const std::vector<int64_t>& pads,
                   std::vector<int64_t> axes, int64_t rank, std::vector<int64_t>& before,
                   std::vector<int64_t>& after) {
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const auto na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * na)
    ctx.fail("pads must have 2 entries per padded axis");
  before.assign(static_cast<size_t>(rank), 0);
  after.assign(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < na; ++i) {
    const auto axis = static_cast<size_t>(normalize_axis(ctx, axes[static_cast<size_t>(i)], rank));
    before[axis] = pads[static_cast<size_t>(i)];
    after[axis] = pads[static_cast<size_t>(i + na)];
  }
}

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) p *= dims[i];
  return p;
}

template <typename T>
std::vector<T> expand_to(const OpContext& ctx, const Tensor& src,
                         const std::vector<int64_t>& shape) {
  const auto& s = src.shape();
  const size_t rank = shape.size();
  if (s.size() > rank) {
    ctx.fail("cannot broadcast " + src.type_str() + " to " + shape_str(shape));
  }
  // Strides of src aligned to the right of `shape`, 0 along broadcast axes.
  std::vector<int64_t> stride(rank, 0);
  for (size_t i = 0, acc = 1; i < s.size(); ++i) {
    const size_t si = s.size() - 1 - i, di = rank - 1 - i;
    if (s[si] != 1 && s[si] != shape[di]) {
      ctx.fail("cannot broadcast " + src.type_str() + " to " + shape_str(shape));
    }
    stride[di] = s[si] == 1 ? 0 : static_cast<int64_t>(acc);
    acc *= static_cast<size_t>(s[si]);
  }
  const T* p = src.data<T>();
  std::vector<T> out(static_cast<size_t>(numel_of(shape)));
  std::vector<int64_t> idx(rank, 0);
  int64_t at = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    out[j] = p[at];
    for (size_t d = rank; d-- > 0;) {
      at += stride[d];
      if (++idx[d] < shape[d]) break;
      at -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}
template std::vector<float> expand_to<float>(const OpContext&, const Tensor&,
                                             const std::vector<int64_t>&);
template std::vector<double> expand_to<double>(const OpContext&, const Tensor&,
                                               const std::vector<int64_t>&);

int geom_slot(size_t i, size_t n) {
  return static_cast<int>(3 - n + i);
}

std::vector<int64_t> geom_cols(const kernels::cpu::ConvGeom& g, size_t n) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(g.cols[geom_slot(i, n)]);
  return out;
}

void check_spatial_rank(const OpContext& ctx, int64_t rank) {
  if (rank < 3 || rank > 5) {
    ctx.fail("input of rank " + std::to_string(rank) +
             " is not supported (1 to 3 spatial dimensions are)");
  }
}

kernels::cpu::ConvGeom window_geometry(const OpContext& ctx, const std::vector<int64_t>& in,
                                       std::vector<int64_t> kernel) {
  const plan::WindowParams& p = plan::params<plan::WindowParams>(ctx.step());
  const size_t n = in.size();
  if (!p.kernel().empty()) kernel.assign(p.kernel().begin(), p.kernel().end());
  const std::vector<int64_t> strides(p.strides().begin(), p.strides().end());
  const std::vector<int64_t> dilations(p.dilations().begin(), p.dilations().end());
  const std::vector<int64_t> pads(p.pads().begin(), p.pads().end());
  const bool ceil_mode = p.ceil_mode();
  if (kernel.size() != n || strides.size() != n || dilations.size() != n || pads.size() != 2 * n) {
    ctx.fail("kernel_shape, strides, dilations or pads do not match the " + std::to_string(n) +
             " spatial dimensions of the input");
  }
  using W = plan::WindowParams;
  const bool same = p.auto_pad() == W::SAME_UPPER || p.auto_pad() == W::SAME_LOWER;
  kernels::cpu::ConvGeom g;
  for (size_t i = 0; i < n; ++i) {
    const int s = geom_slot(i, n);
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0) {
      ctx.fail("kernel_shape, strides and dilations must be positive");
    }
    const int64_t eff = (kernel[i] - 1) * dilations[i] + 1;
    int64_t pb = pads[i], pe = pads[i + n], out;
    if (same) {
      out = (in[i] + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in[i]);
      pb = p.auto_pad() == W::SAME_UPPER ? total / 2 : total - total / 2;
      pe = total - pb;
    } else {
      if (p.auto_pad() == W::VALID) pb = pe = 0;
      const int64_t span = in[i] + pb + pe - eff;
      if (span < 0) {
        ctx.fail("kernel extent " + std::to_string(eff) + " exceeds the padded input size " +
                 std::to_string(in[i] + pb + pe));
      }
      out = 1 + (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]);
    }
    g.image[s] = in[i];
    g.cols[s] = out;
    g.kernel[s] = kernel[i];
    g.stride[s] = strides[i];
    g.dilation[s] = dilations[i];
    g.pad[s] = pb;
    g.pad_end[s] = pe;
  }
  return g;
}

kernels::cpu::DnnlConv dnnl_conv_problem(const kernels::cpu::ConvGeom& g, size_t spatial, int64_t n,
                                         int64_t c, int64_t m, int64_t group) {
  kernels::cpu::DnnlConv p;
  p.spatial = static_cast<int>(spatial);
  p.n = n;
  p.c = c;
  p.m = m;
  p.group = group;
  for (size_t i = 0; i < spatial; ++i) {
    const int s = geom_slot(i, spatial);
    p.image[i] = g.image[s];
    p.cols[i] = g.cols[s];
    p.kernel[i] = g.kernel[s];
    p.stride[i] = g.stride[s];
    p.dilation[i] = g.dilation[s];
    p.pad[i] = g.pad[s];
  }
  return p;
}

}  // namespace ampc::rt::cpu::nn
