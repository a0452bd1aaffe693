#include "passes/lower_grid_sample.h"

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "passes/autodiff/grad_builder.h"

namespace ampc::passes {
namespace {

using autodiff::attrs;
using autodiff::GradBuilder;
using ir::Value;
using Shape = std::vector<int64_t>;

std::string string_attr(const ir::Node& n, const char* name, const char* fallback) {
  const ir::Attribute* a = n.attr(name);
  return a ? a->s : fallback;
}

// One GridSample node's sampling, built with `b`: x [N, C, H, W], grid [N, Ho, Wo, 2].
class Sampler {
 public:
  Sampler(GradBuilder& b, const ir::Node& n) : b_(b), x_(n.inputs[0]), grid_(n.inputs[1]) {
    const Shape& xs = *x_->type.shape;
    const Shape& gs = *grid_->type.shape;
    n_ = xs[0], c_ = xs[1], h_ = xs[2], w_ = xs[3], ho_ = gs[1], wo_ = gs[2];
    align_ = n.attr("align_corners") && n.attr("align_corners")->i != 0;
    border_ = string_attr(n, "padding_mode", "zeros") == "border";
    coords_ = {grid_->type.dtype, Shape{n_, ho_, wo_}};
    positions_ = {DType::kInt64, Shape{n_, ho_, wo_}};
    flat_ = b_.reshape(x_, {n_, c_, h_ * w_});
  }

  Value* bilinear() {
    Value* ix = coordinate(0, w_);
    Value* iy = coordinate(1, h_);
    auto [x0, x1, wx0, wx1] = corners(ix);
    auto [y0, y1, wy0, wy1] = corners(iy);
    // PyTorch's order: nw + ne + sw + se.
    Value* out = corner(x0, y0, mul(wx0, wy0));
    out = add(out, corner(x1, y0, mul(wx1, wy0)));
    out = add(out, corner(x0, y1, mul(wx0, wy1)));
    return add(out, corner(x1, y1, mul(wx1, wy1)));
  }

  // The pixel at the coordinates rounded half to even (PyTorch's nearbyint).
  Value* nearest() {
    Value* ix = round_half_even(coordinate(0, w_));
    Value* iy = round_half_even(coordinate(1, h_));
    return b_.op("Where",
                 {b_.reshape(inside(ix, iy), {n_, 1, ho_, wo_}), gather(ix, iy),
                  b_.scalar(0, x_->type.dtype)},
                 out_type());
  }

 private:
  ir::TensorType out_type() const { return {x_->type.dtype, Shape{n_, c_, ho_, wo_}}; }
  Value* scalar(double v) { return b_.scalar(v, coords_.dtype); }
  Value* mul(Value* a, Value* b) { return b_.op("Mul", {a, b}, a->type); }
  Value* add(Value* a, Value* b) { return b_.op("Add", {a, b}, a->type); }
  Value* int_scalar(int64_t v) { return b_.scalar(static_cast<double>(v), DType::kInt64); }

  // The grid's x (k 0) or y (k 1) in pixels of an axis of `size`: ((g + 1) / 2) (size - 1)
  // with align_corners, else ((g + 1) size - 1) / 2; clipped into [0, size - 1] for border.
  Value* coordinate(int64_t k, int64_t size) {
    Value* g =
        b_.op("Gather", {grid_, int_scalar(k)}, coords_, attrs(ir::Attribute::make_int("axis", 3)));
    Value* shifted = b_.op("Add", {g, scalar(1)}, coords_);
    Value* u =
        align_ ? b_.op("Mul",
                       {b_.op("Div", {shifted, scalar(2)}, coords_),
                        scalar(static_cast<double>(size - 1))},
                       coords_)
               : b_.op("Div",
                       {b_.op("Sub",
                              {b_.op("Mul", {shifted, scalar(static_cast<double>(size))}, coords_),
                               scalar(1)},
                              coords_),
                        scalar(2)},
                       coords_);
    if (!border_) return u;
    // PyTorch's clip sends a NaN coordinate to 0 (and +-inf to the edges, as Clip does).
    Value* clipped = b_.op("Clip", {u, scalar(0), scalar(static_cast<double>(size - 1))}, coords_);
    Value* is_number = b_.op("Equal", {u, u}, {DType::kBool, coords_.shape});
    return b_.op("Where", {is_number, clipped, scalar(0)}, coords_);
  }

  // floor(u) and floor(u) + 1 as integers (no gradient), and their weights 1 - f and f,
  // f = u - floor(u) (the gradient reaches u through f).
  std::tuple<Value*, Value*, Value*, Value*> corners(Value* u) {
    Value* lo = b_.cast(b_.op("Floor", {u}, coords_), DType::kInt64);
    Value* hi = b_.op("Add", {lo, int_scalar(1)}, positions_);
    Value* frac = b_.op("Sub", {u, b_.cast(lo, coords_.dtype)}, coords_);
    Value* rest = b_.op("Sub", {scalar(1), frac}, coords_);
    return {lo, hi, rest, frac};
  }

  // u rounded half to even, as an integer: floor(u), plus one above the half and at the half
  // of an odd floor. (Floor, comparisons and integer Mod run on both backends; Round has no
  // CUDA kernel.)
  Value* round_half_even(Value* u) {
    const ir::TensorType flags{DType::kBool, positions_.shape};
    Value* f = b_.op("Floor", {u}, coords_);
    Value* lo = b_.cast(f, DType::kInt64);
    Value* d = b_.op("Sub", {u, f}, coords_);
    Value* odd =
        b_.op("Equal", {b_.op("Mod", {lo, int_scalar(2)}, positions_), int_scalar(1)}, flags);
    Value* up = b_.op("Or",
                      {b_.op("Greater", {d, scalar(0.5)}, flags),
                       b_.op("And", {b_.op("Equal", {d, scalar(0.5)}, flags), odd}, flags)},
                      flags);
    return b_.op("Add", {lo, b_.cast(up, DType::kInt64)}, positions_);
  }

  // Whether the pixel (ix, iy) lies in the image.
  Value* inside(Value* ix, Value* iy) {
    const ir::TensorType flags{DType::kBool, positions_.shape};
    auto within = [&](Value* i, int64_t size) {
      return b_.op("And",
                   {b_.op("GreaterOrEqual", {i, int_scalar(0)}, flags),
                    b_.op("LessOrEqual", {i, int_scalar(size - 1)}, flags)},
                   flags);
    };
    return b_.op("And", {within(ix, w_), within(iy, h_)}, flags);
  }

  // Every channel's pixel at (ix, iy), the positions clamped into the image.
  Value* gather(Value* ix, Value* iy) {
    Value* xc = b_.op("Clip", {ix, int_scalar(0), int_scalar(w_ - 1)}, positions_);
    Value* yc = b_.op("Clip", {iy, int_scalar(0), int_scalar(h_ - 1)}, positions_);
    Value* at = b_.op("Add", {b_.op("Mul", {yc, int_scalar(w_)}, positions_), xc}, positions_);
    Value* index =
        b_.op("Expand", {b_.reshape(at, {n_, 1, ho_ * wo_}), b_.ints({n_, c_, ho_ * wo_})},
              {DType::kInt64, Shape{n_, c_, ho_ * wo_}});
    Value* v = b_.op("GatherElements", {flat_, index}, {x_->type.dtype, Shape{n_, c_, ho_ * wo_}},
                     attrs(ir::Attribute::make_int("axis", 2)));
    return b_.reshape(v, {n_, c_, ho_, wo_});
  }

  // One corner's term: its pixels times its weight, 0 where the corner lies outside. The
  // weight is multiplied by the flag, not selected by it, so that a coordinate that is not a
  // number (NaN, or an infinity's inf - inf) gives NaN as PyTorch's kernel does.
  Value* corner(Value* ix, Value* iy, Value* weight) {
    Value* kept = b_.op("Mul", {weight, b_.cast(inside(ix, iy), coords_.dtype)}, coords_);
    Value* w = b_.reshape(b_.cast(kept, x_->type.dtype), {n_, 1, ho_, wo_});
    return b_.op("Mul", {gather(ix, iy), w}, out_type());
  }

  GradBuilder& b_;
  Value* x_;
  Value* grid_;
  Value* flat_ = nullptr;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, ho_ = 0, wo_ = 0;
  bool align_ = false, border_ = false;
  ir::TensorType coords_, positions_;
};

void check(const ir::Node& n) {
  const Value* x = n.inputs.size() > 0 ? n.inputs[0] : nullptr;
  const Value* grid = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
  if (!x || !grid || !x->type.is_static() || !grid->type.is_static())
    throw Error("node " + n.label() + ": GridSample needs static input and grid shapes");
  if (x->type.shape->size() != 4 || grid->type.shape->size() != 4 || (*grid->type.shape)[3] != 2)
    throw Error("node " + n.label() + ": GridSample of " + x->type.str() + " by a " +
                grid->type.str() + " grid is not supported (images [N, C, H, W] by grids " +
                "[N, Ho, Wo, 2] are)");
  if (!is_float(x->type.dtype) || !is_float(grid->type.dtype))
    throw Error("node " + n.label() + ": GridSample of " + x->type.str() + " is not supported");
  const std::string mode = string_attr(n, "mode", "bilinear");
  if (mode != "bilinear" && mode != "nearest")
    throw Error("node " + n.label() + ": GridSample mode '" + mode +
                "' is not supported (bilinear and nearest are)");
  const std::string padding = string_attr(n, "padding_mode", "zeros");
  if (padding != "zeros" && padding != "border")
    throw Error("node " + n.label() + ": GridSample padding_mode '" + padding +
                "' is not supported (zeros and border are)");
}

}  // namespace

int lower_grid_sample(ir::Model& model) {
  ir::Graph& g = *model.graph;
  int lowered = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node* n = g.nodes[i].get();
    if (n->op_type != "GridSample" || !n->domain.empty()) continue;
    check(*n);
    const size_t first_new = g.nodes.size();
    const std::string prefix =
        (n->name.empty() ? std::string("grid_sample") : n->name) + "/lowered";
    GradBuilder b(g, prefix);
    // PyTorch's autocast computes grid_sampler in fp32 (in fp16 a coordinate of 300 moves in
    // steps of 0.25): autocast keeps these nodes there.
    model.fp32_lowerings.push_back({prefix + "/", "GridSample"});
    Sampler sampler(b, *n);
    Value* out =
        string_attr(*n, "mode", "bilinear") == "nearest" ? sampler.nearest() : sampler.bilinear();
    ir::replace_by_appended(g, n, first_new, out);
    ++lowered;
  }
  return lowered;
}

}  // namespace ampc::passes
