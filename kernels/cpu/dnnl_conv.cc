#include "kernels/cpu/dnnl_conv.h"

#include <string>
#include <vector>

#include "kernels/cpu/dnnl_context.h"

namespace ampc::kernels::cpu {
namespace {

namespace ds = dnnl_support;
using dnnl::memory;
using tag = memory::format_tag;

enum class Direction { kForward, kBackwardData, kBackwardWeights };

std::string key_of(const DnnlConv& p, Direction d, bool bias) {
  std::string k = "conv" + std::to_string(static_cast<int>(d));
  for (int64_t v : {int64_t(p.x_type), int64_t(p.w_type), int64_t(p.y_type),
                    int64_t(bias ? p.bias_type : DType::kUndefined), int64_t(p.spatial), p.n, p.c,
                    p.m, p.group}) {
    k += ',' + std::to_string(v);
  }
  for (int i = 0; i < p.spatial; ++i) {
    for (int64_t v : {p.image[i], p.cols[i], p.kernel[i], p.stride[i], p.dilation[i], p.pad[i]}) {
      k += ',' + std::to_string(v);
    }
  }
  return k;
}

// The plain tag of `rank` dimensions (abc, abcd, ...).
tag plain(int rank) {
  switch (rank) {
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
    default:
      return tag::abcdef;
  }
}

struct Descs {
  memory::desc x, w, y, bias;                  // the user's (plain) layouts
  memory::desc x_any, w_any, y_any, bias_any;  // what the primitive is asked for
  memory::dims strides, dilates, pad_l, pad_r;
  bool ok = false;
};

// What the primitive computes on: oneDNN's choice of layout in the user's element types, or
// (kF32Any) in fp32, the bf16 operands widened exactly and the results rounded once by the
// reorders around the call.
enum class Inner { kAny, kF32Any };

Descs descs(const DnnlConv& p, bool with_bias, Inner inner = Inner::kAny) {
  Descs d;
  memory::data_type tx, tw, ty, tb = memory::data_type::f32;
  if (p.spatial < 1 || p.spatial > 3 || p.group < 1 || !ds::dnnl_type(p.x_type, &tx) ||
      !ds::dnnl_type(p.w_type, &tw) || !ds::dnnl_type(p.y_type, &ty) ||
      (with_bias && !ds::dnnl_type(p.bias_type, &tb))) {
    return d;
  }
  memory::dims xd = {p.n, p.c}, yd = {p.n, p.m}, wd;
  if (p.group > 1)
    wd = {p.group, p.m / p.group, p.c / p.group};
  else
    wd = {p.m, p.c};
  for (int i = 0; i < p.spatial; ++i) {
    xd.push_back(p.image[i]);
    yd.push_back(p.cols[i]);
    wd.push_back(p.kernel[i]);
    const int64_t extent = (p.kernel[i] - 1) * p.dilation[i] + 1;
    // The right padding the last window reaches; negative where the stride leaves the image's
    // last rows unread (a 1x1 stride-2 convolution of an even size, ResNet's downsampling).
    // oneDNN sizes the output as (image + pads - extent) / stride + 1, rounded down, so no
    // padding there gives the same windows.
    int64_t pad_r = (p.cols[i] - 1) * p.stride[i] + extent - p.image[i] - p.pad[i];
    if (pad_r < 0 && pad_r > -p.stride[i]) pad_r = 0;
    if (p.pad[i] < 0 || pad_r < 0) return d;  // negative padding: the im2col path serves it
    d.strides.push_back(p.stride[i]);
    d.dilates.push_back(p.dilation[i] - 1);  // oneDNN counts the taps skipped
    d.pad_l.push_back(p.pad[i]);
    d.pad_r.push_back(pad_r);
  }
  const int rank = static_cast<int>(xd.size());
  d.x = memory::desc(xd, tx, plain(rank));
  d.y = memory::desc(yd, ty, plain(rank));
  d.w = memory::desc(wd, tw, plain(static_cast<int>(wd.size())));
  if (with_bias) d.bias = memory::desc({p.m}, tb, tag::a);
  const bool f32 = inner == Inner::kF32Any;
  const memory::data_type t32 = memory::data_type::f32;
  d.x_any = memory::desc(xd, f32 ? t32 : tx, tag::any);
  d.y_any = memory::desc(yd, f32 ? t32 : ty, tag::any);
  d.w_any = memory::desc(wd, f32 ? t32 : tw, tag::any);
  d.bias_any = with_bias && f32 ? memory::desc({p.m}, t32, tag::a) : d.bias;
  d.ok = true;
  return d;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool with_bias,
                                                     const dnnl::primitive_attr& attr) {
  using fwd = dnnl::convolution_forward;
  const fwd::desc desc =
      with_bias
          ? fwd::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                      d.x_any, d.w_any, d.bias_any, d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r)
          : fwd::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                      d.x_any, d.w_any, d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r);
  return fwd::primitive_desc(desc, attr, ds::engine());
}

std::unique_ptr<ds::Prepared> make_forward(const DnnlConv& p, bool with_bias) {
  const Descs d = descs(p, with_bias);
  if (!d.ok) return nullptr;
  const auto pd = forward_pd(d, with_bias, ds::user_scratchpad_attr());
  std::vector<ds::ArgSpec> args = {{DNNL_ARG_SRC, d.x, false}, {DNNL_ARG_WEIGHTS, d.w, false}};
  if (with_bias) args.push_back({DNNL_ARG_BIAS, d.bias, false});
  args.push_back({DNNL_ARG_DST, d.y, true});
  return ds::prepare(pd, dnnl::convolution_forward(pd), args);
}

std::unique_ptr<ds::Prepared> make_backward_data(const DnnlConv& p) {
  const Descs d = descs(p, false);
  if (!d.ok) return nullptr;
  using bwd = dnnl::convolution_backward_data;
  // fp32 dX from bf16 dY and W (a transposed convolution's sums before its bias): the hint is
  // the all-bf16 forward, as no forward convolution reads fp32 next to bf16 weights.
  Descs fwd = d;
  if (p.x_type != p.y_type) fwd.x_any = memory::desc(d.x_any.dims(), d.y_any.data_type(), tag::any);
  const auto hint = forward_pd(fwd, false, dnnl::primitive_attr());
  const bwd::primitive_desc pd(bwd::desc(dnnl::algorithm::convolution_direct, d.x_any, d.w_any,
                                         d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r),
                               ds::user_scratchpad_attr(), ds::engine(), hint);
  return ds::prepare(pd, bwd(pd),
                     {{DNNL_ARG_DIFF_DST, d.y, false},
                      {DNNL_ARG_WEIGHTS, d.w, false},
                      {DNNL_ARG_DIFF_SRC, d.x, true}});
}

bool depthwise(const DnnlConv& p) {
  return p.group > 1 && p.group == p.c;
}

std::unique_ptr<ds::Prepared> make_backward_weights(const DnnlConv& p, bool with_bias) {
  // bf16 weight gradients in fp32: oneDNN 2.6's blocked bf16 kernel for them reduces across
  // threads through spinning barriers, which on shared cores (a preempted thread) took 0.2-0.4 s
  // per call where it needs 5 ms, and its GEMM-based kernel for plain layouts is slower than
  // the fp32 one. The reorders widen dY and X exactly and round dW (and dB) once: the same
  // numbers, fp32 accumulation and one rounding.
  const Descs d = descs(p, with_bias, p.x_type == DType::kBFloat16 ? Inner::kF32Any : Inner::kAny);
  if (!d.ok) return nullptr;
  using bwd = dnnl::convolution_backward_weights;
  const auto hint = forward_pd(d, with_bias, dnnl::primitive_attr());
  const bwd::desc desc =
      with_bias ? bwd::desc(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.bias_any,
                            d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r)
                : bwd::desc(dnnl::algorithm::convolution_direct, d.x_any, d.w_any, d.y_any,
                            d.strides, d.dilates, d.pad_l, d.pad_r);
  const bwd::primitive_desc pd(desc, ds::user_scratchpad_attr(), ds::engine(), hint);
  // A depthwise problem that oneDNN's depthwise kernel refuses falls to its GEMM path: one tiny
  // GEMM per channel, far slower than the direct sums of depthwise_grad.h, which the caller runs.
  if (depthwise(p) && std::string(pd.impl_info_str()).find("gemm") != std::string::npos) {
    return nullptr;
  }
  std::vector<ds::ArgSpec> args = {{DNNL_ARG_DIFF_DST, d.y, false},
                                   {DNNL_ARG_SRC, d.x, false},
                                   {DNNL_ARG_DIFF_WEIGHTS, d.w, true}};
  if (with_bias) args.push_back({DNNL_ARG_DIFF_BIAS, d.bias, true});
  return ds::prepare(pd, bwd(pd), args);
}

bool empty(const DnnlConv& p) {
  int64_t sizes = p.n * p.c * p.m;
  for (int i = 0; i < p.spatial; ++i) sizes *= p.image[i] * p.cols[i] * p.kernel[i];
  return sizes == 0;
}

// Small convolutions run on the calling thread (dnnl_context.h's kSerialMultiplyAdds); every
// direction has the forward's multiply-add count.
bool serial(const DnnlConv& p) {
  double multiply_adds = static_cast<double>(p.n) * p.m * (p.c / p.group);
  for (int i = 0; i < p.spatial; ++i) multiply_adds *= p.cols[i] * p.kernel[i];
  return multiply_adds < ds::kSerialMultiplyAdds;
}

// One pass: the cached primitive for (p, direction, bias), made by `make` on first use, run on
// `buffers`; false (the caller falls back) when p is empty or oneDNN cannot serve it.
template <typename Make>
bool run_conv(const DnnlConv& p, Direction d, bool with_bias, Make&& make,
              const std::vector<const void*>& buffers) {
  if (empty(p)) return false;
  const ds::Prepared* prepared = ds::find_or_make(key_of(p, d, with_bias), make, serial(p));
  if (!prepared) return false;
  ds::execute(*prepared, buffers);
  return true;
}

}  // namespace

bool dnnl_conv_forward(const DnnlConv& p, const void* x, const void* w, const void* bias, void* y) {
  const bool with_bias = bias != nullptr;
  return run_conv(
      p, Direction::kForward, with_bias, [&] { return make_forward(p, with_bias); },
      with_bias ? std::vector<const void*>{x, w, bias, y} : std::vector<const void*>{x, w, y});
}

bool dnnl_conv_backward_data(const DnnlConv& p, const void* dy, const void* w, void* dx) {
  return run_conv(p, Direction::kBackwardData, false, [&] { return make_backward_data(p); },
                  {dy, w, dx});
}

bool dnnl_conv_backward_weights(const DnnlConv& p, const void* dy, const void* x, void* dw,
                                void* db) {
  const bool with_bias = db != nullptr;
  return run_conv(
      p, Direction::kBackwardWeights, with_bias,
      [&] { return make_backward_weights(p, with_bias); },
      with_bias ? std::vector<const void*>{dy, x, dw, db} : std::vector<const void*>{dy, x, dw});
}

}  // namespace ampc::kernels::cpu
