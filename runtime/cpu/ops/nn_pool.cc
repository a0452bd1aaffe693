// Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms, and MaxUnpool.
// MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool run the CUDA kernels' CPU twin
// (kernels/twin/pool.h), so that both backends compute them in the same order, bit for bit;
// LpPool has no CUDA kernel and runs kernels/cpu/pool.h.
#include "kernels/cpu/pool.h"
#include "kernels/twin/pool.h"
#include "runtime/cpu/op_registry.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu::nn {
namespace {

namespace k = kernels::cpu;
namespace tw = kernels::twin;

enum class Pool { kMax, kAvg, kLp };

// Geometry of a windowed pooling op (kernel_shape required) or of a global one (one window
// over the flattened spatial dimensions), and the output shape.
k::ConvGeom pool_geometry(const OpContext& ctx, bool global, std::vector<int64_t>* shape) {
  const Tensor& x = ctx.in(0);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  *shape = {x.dim(0), x.dim(1)};
  if (global) {
    k::ConvGeom g;
    g.image[2] = g.kernel[2] = product(in, 0, in.size());
    shape->resize(x.shape().size(), 1);
    return g;
  }
  check_spatial_rank(ctx, x.rank());
  const k::ConvGeom g = window_geometry(ctx, in, {});
  for (int64_t d : geom_cols(g, in.size())) shape->push_back(d);
  return g;
}

template <Pool kind, bool global, typename T>
void pool(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2) ctx.fail("input " + x.type_str() + " has no channel dimension");
  std::vector<int64_t> shape;
  const k::ConvGeom g = pool_geometry(ctx, global, &shape);
  Tensor& y = ctx.output(0, x.dtype(), shape);
  const int64_t planes = x.dim(0) * x.dim(1);
  if constexpr (kind == Pool::kMax) {
    int64_t* indices =
        ctx.has_output(1) ? ctx.output(1, DType::kInt64, shape).data<int64_t>() : nullptr;
    if (y.numel() == 0) return;
    tw::max_pool(x.dtype(), g, planes, x.raw(), y.raw(), indices,
                 !global && plan::params<plan::WindowParams>(ctx.step()).column_major_indices());
  } else if constexpr (kind == Pool::kAvg) {
    if (y.numel() == 0) return;
    if constexpr (global) {  // the CUDA kernel's block reduction per plane
      tw::global_average_pool(x.dtype(), planes, g.image_size(), x.raw(), y.raw());
    } else {
      tw::average_pool(x.dtype(), g, planes, x.raw(), y.raw(),
                       plan::params<plan::WindowParams>(ctx.step()).count_include_pad());
    }
  } else {
    const int64_t p = plan::params<plan::WindowParams>(ctx.step()).p();
    if (y.numel() == 0) return;
    k::lp_pool(g, x.data<T>(), planes, y.data<T>(), p);
  }
}

// MaxPool and AveragePool take 16-bit inputs as they are: the twin loads them into fp32 and
// rounds each result once, as the CUDA kernel does, without a widened copy of the input and
// a rounding pass over the output. LpPool runs widened (add_widened).
template <Pool kind, bool global>
void pool_op(OpContext& ctx) {
  auto run = [&](auto tag) { pool<kind, global, decltype(tag)>(ctx); };
  bool ok;
  if constexpr (kind == Pool::kMax) {
    ok = dispatch<float, double, Half, BFloat16, int8_t, uint8_t>(ctx.in(0).dtype(), run);
  } else if constexpr (kind == Pool::kAvg) {
    ok = dispatch<float, double, Half, BFloat16>(ctx.in(0).dtype(), run);
  } else {
    ok = dispatch<float, double>(ctx.in(0).dtype(), run);
  }
  if (!ok) ctx.unsupported_dtype(0);
}

// Copies src into the leading corner of dst (zeros elsewhere, extra src cut off).
template <typename T>
void embed(const Tensor& src, Tensor& dst) {
  const auto& s = src.shape();
  const auto& d = dst.shape();
  std::vector<int64_t> idx(s.size(), 0);
  const T* sp = src.data<T>();
  T* dp = dst.data<T>();
  for (int64_t j = 0; j < src.numel(); ++j) {
    int64_t at = 0;
    bool inside = true;
    for (size_t k = 0; k < s.size(); ++k) {
      inside = inside && idx[k] < d[k];
      at = at * d[k] + idx[k];
    }
    if (inside) dp[at] = sp[j];
    for (size_t k = s.size(); k-- > 0;) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
}

// Y[I[j]] = X[j] over the shape MaxPool's input had (from kernel_shape, strides, pads);
// with output_shape, that result sits in the leading corner of a zero tensor of that shape
// (as ONNX's reference does).
template <typename T>
void max_unpool(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& ind = ctx.in(1);
  if (ind.dtype() != DType::kInt64) ctx.unsupported_dtype(1);
  if (ind.shape() != x.shape())
    ctx.fail("I " + ind.type_str() + " does not match X " + x.type_str());
  check_spatial_rank(ctx, x.rank());
  const size_t n = x.shape().size() - 2;
  const auto kernel = ctx.attr_ints("kernel_shape");
  const auto strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  const auto pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (kernel.size() != n || strides.size() != n || pads.size() != 2 * n) {
    ctx.fail("kernel_shape, strides or pads do not match the input");
  }
  std::vector<int64_t> shape = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < n; ++i) {
    shape.push_back((x.dim(2 + i) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]);
  }
  Tensor y(x.dtype(), shape);
  const T* xp = x.data<T>();
  const int64_t* ip = ind.data<int64_t>();
  T* yp = y.data<T>();
  for (int64_t j = 0; j < x.numel(); ++j) {
    if (ip[j] < 0 || ip[j] >= y.numel()) {
      ctx.fail("index " + std::to_string(ip[j]) + " is outside the output " + y.type_str());
    }
    yp[ip[j]] = xp[j];
  }
  if (!ctx.input(2)) return ctx.set_output(0, std::move(y));
  const std::vector<int64_t> out_shape = int_values(ctx, 2);
  if (out_shape.size() != shape.size()) ctx.fail("output_shape has the wrong rank");
  embed<T>(y, ctx.output(0, x.dtype(), out_shape));
}

void max_unpool_op(OpContext& ctx) {
  dispatch_float(ctx, [&](auto tag) { max_unpool<decltype(tag)>(ctx); });
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add("MaxPool", pool_op<Pool::kMax, false>);
  r.add("MaxPool", pool_op<Pool::kMax, false>, "ampc");  // with bf16 (autocast)
  r.add("AveragePool", pool_op<Pool::kAvg, false>);
  r.add("AveragePool", pool_op<Pool::kAvg, false>, "ampc");  // with bf16 (autocast)
  add_widened(r, "LpPool", pool_op<Pool::kLp, false>);
  r.add("GlobalMaxPool", pool_op<Pool::kMax, true>);
  r.add("GlobalAveragePool", pool_op<Pool::kAvg, true>);
  r.add("GlobalAveragePool", pool_op<Pool::kAvg, true>, "ampc");  // with bf16 (autocast)
  add_widened(r, "GlobalLpPool", pool_op<Pool::kLp, true>);
  add_widened(r, "MaxUnpool", max_unpool_op);
}

}  // namespace ampc::rt::cpu::nn
