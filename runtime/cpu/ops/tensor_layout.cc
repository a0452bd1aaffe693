// Operators that move data to a new layout: Transpose, Concat, Split, Slice, Expand, Tile,
// Pad, DepthToSpace, SpaceToDepth, Trilu. Most are one strided copy.
#include <algorithm>

#include "kernels/cpu/elementwise_types.h"
#include "runtime/cpu/ops/nn_util.h"
#include "runtime/cpu/ops/tensor_common.h"
#include "runtime/plan/step_params.h"

namespace ampc::rt::cpu {
namespace {

void transpose_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto& given = plan::params<plan::TransposeParams>(ctx.step()).perm();
  std::vector<int64_t> perm(given.begin(), given.end());
  if (perm.empty()) {
    for (int64_t i = x.rank(); i-- > 0;) perm.push_back(i);
  }
  std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
  if (static_cast<int64_t>(perm.size()) != x.rank()) ctx.fail("perm does not match the input rank");
  for (int64_t& p : perm) {
    p = normalize_axis(ctx, p, x.rank());
    if (seen[p]) ctx.fail("perm repeats axis " + std::to_string(p));
    seen[p] = true;
  }
  Tensor& y = ctx.output_for_overwrite(0, x.dtype(), transposed_shape(x.shape(), perm));
  transpose_into(x, x.shape(), perm, y);
}

void concat_op(OpContext& ctx) {
  const Tensor& first = ctx.in(0);
  const int64_t axis =
      normalize_axis(ctx, plan::params<plan::AxisParams>(ctx.step()).axis(), first.rank());
  Shape shape = first.shape();
  shape[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.in(i);
    if (t.dtype() != first.dtype()) ctx.fail("inputs have different element types");
    bool ok = t.rank() == first.rank();
    for (int64_t d = 0; ok && d < t.rank(); ++d) ok = d == axis || t.dim(d) == first.dim(d);
    if (!ok)
      ctx.fail("input shapes " + shape_str(first.shape()) + " and " + shape_str(t.shape()) +
               " do not concatenate");
    shape[axis] += t.dim(axis);
  }
  Tensor& y = ctx.output(0, first.dtype(), shape);
  const Shape out_strides = kc::contiguous_strides(shape);
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.in(i);
    copy_strided(t, 0, kc::contiguous_strides(t.shape()), y, offset * out_strides[axis],
                 out_strides, t.shape());
    offset += t.dim(axis);
  }
}

void split_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const plan::AxisParams& p = plan::params<plan::AxisParams>(ctx.step());
  const int64_t axis = normalize_axis(ctx, p.axis(), x.rank());
  std::vector<int64_t> split(p.split().begin(), p.split().end());
  if (p.runtime_split()) split = int_values(ctx, 1);
  const int64_t n = ctx.num_outputs();
  const int64_t dim = x.dim(axis);
  if (split.empty()) {  // equal parts, the last one smaller when they do not divide the axis
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      split.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  int64_t total = 0;
  for (int64_t s : split) total += s;
  if (total != dim || static_cast<int64_t>(split.size()) != n) {
    ctx.fail("split " + shape_str(split) + " does not divide axis of size " + std::to_string(dim) +
             " into " + std::to_string(n) + " outputs");
  }
  const Shape in_strides = kc::contiguous_strides(x.shape());
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    Shape shape = x.shape();
    shape[axis] = split[i];
    Tensor& y = ctx.output(static_cast<int>(i), x.dtype(), shape);
    copy_strided(x, offset * in_strides[axis], in_strides, y, 0, kc::contiguous_strides(shape),
                 shape);
    offset += split[i];
  }
}

void slice_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const plan::SliceParams& p = plan::params<plan::SliceParams>(ctx.step());
  std::vector<int64_t> starts(p.starts().begin(), p.starts().end());
  std::vector<int64_t> ends(p.ends().begin(), p.ends().end());
  std::vector<int64_t> axes(p.axes().begin(), p.axes().end());
  std::vector<int64_t> steps(p.steps().begin(), p.steps().end());
  if (p.runtime_inputs()) {  // the ranges are computed at run time: inputs 1-4
    starts = int_values(ctx, 1);
    ends = int_values(ctx, 2);
    if (ctx.input(3)) axes = int_values(ctx, 3);
    if (ctx.input(4)) steps = int_values(ctx, 4);
  }
  nn::complete_slice_ranges(ctx, starts, ends, axes, steps);
  Shape shape = x.shape();
  const Shape in_strides = kc::contiguous_strides(x.shape());
  Shape strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = normalize_axis(ctx, axes[i], x.rank());
    const int64_t dim = x.dim(a), step = steps[i];
    const nn::SliceAxis r = nn::slice_axis(starts[i], ends[i], step, dim);
    shape[a] = r.count;
    if (shape[a] > 0) offset += r.start * in_strides[a];
    strides[a] = in_strides[a] * step;
  }
  Tensor& y = ctx.output(0, x.dtype(), shape);
  copy_strided(x, offset, strides, y, 0, kc::contiguous_strides(shape), shape);
}

// Strides that read `in_shape` broadcast to `out_shape` (0 on broadcast dimensions).
Shape broadcast_strides(const Shape& in_shape, const Shape& out_shape) {
  const Shape cs = kc::contiguous_strides(in_shape);
  Shape st(out_shape.size(), 0);
  const size_t off = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) st[off + i] = in_shape[i] == 1 ? 0 : cs[i];
  return st;
}

void expand_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto shape = kc::broadcast_shapes({x.shape(), int_values(ctx, 1)});
  if (!shape)
    ctx.fail("cannot expand " + shape_str(x.shape()) + " to " + shape_str(int_values(ctx, 1)));
  Tensor& y = ctx.output(0, x.dtype(), *shape);
  copy_strided(x, 0, broadcast_strides(x.shape(), *shape), y, 0, kc::contiguous_strides(*shape),
               *shape);
}

// Tile: the input viewed as [1, d0, 1, d1, ...] broadcast to [r0, d0, r1, d1, ...].
void tile_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const auto repeats = int_values(ctx, 1);
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    ctx.fail("repeats must have one entry per input dimension");
  const Shape in_strides = kc::contiguous_strides(x.shape());
  Shape view, strides, out_shape;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (repeats[d] < 0) ctx.fail("repeats must not be negative");
    view.insert(view.end(), {repeats[d], x.dim(d)});
    strides.insert(strides.end(), {0, in_strides[d]});
    out_shape.push_back(repeats[d] * x.dim(d));
  }
  Tensor& y = ctx.output(0, x.dtype(), out_shape);
  copy_strided(x, 0, strides, y, 0, kc::contiguous_strides(view), view);
}

// Source index of output position o along a dimension of size `dim` padded by `before`;
// -1 selects the constant.
int64_t pad_source(int64_t o, int64_t before, int64_t dim, int mode) {
  int64_t i = o - before;
  if (i >= 0 && i < dim) return i;
  if (mode == 0) return -1;
  if (mode == 1) return std::clamp<int64_t>(i, 0, dim - 1);  // edge
  if (dim == 1) return 0;                                    // reflect
  const int64_t period = 2 * (dim - 1);
  i %= period;
  if (i < 0) i += period;
  return i < dim ? i : period - i;
}

void pad_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  const plan::PadParams& p = plan::params<plan::PadParams>(ctx.step());
  const int mode = static_cast<int>(p.mode());  // pad_source's codes are PadParams::Mode's
  const int64_t rank = x.rank();
  std::vector<int64_t> before(p.before().begin(), p.before().end());
  std::vector<int64_t> after(p.after().begin(), p.after().end());
  if (p.runtime_pads()) {  // pads (and axes) computed at run time: inputs 1 and 3
    nn::pads_per_axis(ctx, int_values(ctx, 1),
                      ctx.input(3) ? int_values(ctx, 3) : std::vector<int64_t>{}, rank, before,
                      after);
  }
  if (static_cast<int64_t>(before.size()) != rank)
    ctx.fail("pads for " + std::to_string(before.size()) + " axes, the input has " +
             std::to_string(rank));
  Shape shape(rank);
  for (int64_t d = 0; d < rank; ++d) {
    shape[d] = x.dim(d) + before[d] + after[d];
    if (shape[d] < 0) ctx.fail("pads remove more than the whole axis " + std::to_string(d));
    if (mode != 0 && x.dim(d) == 0 && shape[d] > 0)
      ctx.fail(std::string("cannot ") + (mode == 1 ? "edge" : "reflect") + "-pad an empty axis");
  }
  // Per-dimension source tables, then one gather over the output.
  std::vector<std::vector<int64_t>> src(rank);
  const Shape in_strides = kc::contiguous_strides(x.shape());
  for (int64_t d = 0; d < rank; ++d) {
    for (int64_t o = 0; o < shape[d]; ++o) {
      const int64_t i = pad_source(o, before[d], x.dim(d), mode);
      src[d].push_back(i < 0 ? -1 : i * in_strides[d]);
    }
  }
  if (!kc::visit_dtype<kc::kAllTypes>(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T value = kc::store<T>(0);
        if (ctx.opset() < 11) {
          value = kc::store<T>(p.value());
        } else if (const Tensor* v = ctx.input(2); v && v->numel() > 0) {
          if (v->dtype() != x.dtype()) ctx.fail("constant_value has another type than the data");
          value = v->data<T>()[0];
        }
        Tensor& y = ctx.output(0, x.dtype(), shape);
        const T* in = x.data<T>();
        T* out = y.data<T>();
        const int64_t n = y.numel();
        if (rank == 0) {
          out[0] = in[0];
          return;
        }
        const int64_t last = shape[rank - 1];
        const int64_t rows = last ? n / last : 0;
        const std::vector<int64_t>& inner = src[rank - 1];
        auto run_row = [&](int64_t r) {
          int64_t off = 0;
          bool pad = false;
          for (int64_t d = rank - 1, rest = r; d-- > 0;) {
            const int64_t s = src[d][rest % shape[d]];
            rest /= shape[d];
            pad = pad || s < 0;
            off += s;
          }
          T* o = out + r * last;
          for (int64_t j = 0; j < last; ++j)
            o[j] = pad || inner[j] < 0 ? value : in[off + inner[j]];
        };
        if (n < kc::kParallelThreshold) {
          for (int64_t r = 0; r < rows; ++r) run_row(r);
        } else {
#pragma omp parallel for schedule(static)
          for (int64_t r = 0; r < rows; ++r) run_row(r);
        }
      })) {
    ctx.unsupported_dtype(0);
  }
}

void depth_to_space_op(OpContext& ctx, bool to_space) {
  const Tensor& x = ctx.in(0);
  const nn::BlockMove m = nn::block_move(ctx, x.shape(), to_space);
  Tensor y = transpose_view(x, m.view, m.perm);
  y.reshape(m.out);
  ctx.set_output(0, std::move(y));
}

void trilu_op(OpContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2");
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int64_t k = ctx.input(1) ? int_values(ctx, 1).at(0) : 0;
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  Tensor& y = ctx.output_copy_of_input(0, 0);
  visit_storage(x.dtype(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U* out = storage<U>(y);
    const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? j - i >= k : j - i <= k;
          if (!keep) out[(m * rows + i) * cols + j] = U{};
        }
      }
    }
  });
}

}  // namespace

namespace nn {

BlockMove block_move(const OpContext& ctx, const Shape& x, bool to_space) {
  if (x.size() != 4) ctx.fail("input must be 4-D, got " + shape_str(x));
  const plan::BlockParams& p = plan::params<plan::BlockParams>(ctx.step());
  const int64_t b = p.blocksize();
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  if (b <= 0) ctx.fail("blocksize must be positive");
  if (!to_space) {
    if (h % b || w % b) ctx.fail("spatial dimensions are not multiples of blocksize");
    return {{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, c * b * b, h / b, w / b}};
  }
  if (c % (b * b)) ctx.fail("channels are not a multiple of blocksize^2");
  const Shape out = {n, c / (b * b), h * b, w * b};
  if (p.crd()) return {{n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, out};
  return {{n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, out};
}

}  // namespace nn

void register_tensor_layout(OpRegistry& r) {
  r.add("Transpose", transpose_op);
  r.add("Concat", concat_op);
  r.add("Split", split_op);
  r.add("Slice", slice_op);
  r.add("Expand", expand_op);
  r.add("Tile", tile_op);
  r.add("Pad", pad_op);
  r.add("DepthToSpace", [](OpContext& ctx) { depth_to_space_op(ctx, true); });
  r.add("SpaceToDepth", [](OpContext& ctx) { depth_to_space_op(ctx, false); });
  r.add("Trilu", trilu_op);
}

}  // namespace ampc::rt::cpu
