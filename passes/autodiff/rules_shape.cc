// Gradients of ops that only move data: the gradient moves back the same way.
#include "passes/autodiff/gradient_registry.h"

namespace ampc::passes::autodiff {
namespace {

using ir::Value;

// Reshape, Flatten, Squeeze, Unsqueeze: same elements, other shape.
void reshape_like(GradContext& c) {
  c.set_input_grad(0, c.b.reshape(c.output_grad(0), *c.input(0)->type.shape));
}

void transpose(GradContext& c) {
  const auto rank = c.input(0)->type.shape->size();
  std::vector<int64_t> perm;
  if (const auto* a = c.node().attr("perm")) {
    perm = a->ints;
  } else {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  // A matrix transpose whose incoming gradient is a product P Q that nothing else reads:
  // (P Q)^T = Q^T P^T, one GEMM instead of a GEMM and a transpose of its result. A Linear
  // layer, exported as MatMul(X, Transpose(W)), then gets dW = dY^T X in W's own layout.
  Value* dy = c.output_grad(0);
  if (const ir::Node* mm = dy->producer;
      rank == 2 && perm == std::vector<int64_t>{1, 0} && mm && mm->domain.empty() &&
      mm->op_type == "MatMul" && dy->uses.empty() && mm->inputs.size() == 2 &&
      mm->inputs[0]->type.shape->size() == 2 && mm->inputs[1]->type.shape->size() == 2) {
    c.set_input_grad(
        0, c.b.op("MatMul", {c.b.transpose_last(mm->inputs[1]), c.b.transpose_last(mm->inputs[0])},
                  c.input(0)->type));
    return;
  }
  // The same for a Gemm without C (the weight gradient of a linear layer that
  // passes/linear_as_gemm.h made a Gemm): (op(A) op(B))^T = op(B)^T op(A)^T, by its flags.
  if (const ir::Node* gemm = dy->producer;
      rank == 2 && perm == std::vector<int64_t>{1, 0} && gemm && gemm->domain.empty() &&
      gemm->op_type == "Gemm" && dy->uses.empty() &&
      (gemm->inputs.size() == 2 || (gemm->inputs.size() == 3 && !gemm->inputs[2]))) {
    auto flag = [&](const char* name) {
      const ir::Attribute* a = gemm->attr(name);
      return a && a->i != 0;
    };
    const ir::Attribute* alpha = gemm->attr("alpha");
    c.set_input_grad(0, c.b.op("Gemm", {gemm->inputs[1], gemm->inputs[0]}, c.input(0)->type,
                               attrs(ir::Attribute::make_float("alpha", alpha ? alpha->f : 1.0f),
                                     ir::Attribute::make_int("transA", !flag("transB")),
                                     ir::Attribute::make_int("transB", !flag("transA")))));
    return;
  }
  std::vector<int64_t> inverse(rank);
  for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  c.set_input_grad(0, c.b.op("Transpose", {dy}, c.input(0)->type,
                             attrs(ir::Attribute::make_ints("perm", inverse))));
}

// DepthToSpace is Reshape -> Transpose -> Reshape; its gradient runs the three backwards.
// DCR: [N,C,H,W] -> [N,b,b,C',H,W] -> perm (0,3,4,1,5,2) -> [N,C',H,b,W,b] -> [N,C',Hb,Wb];
// CRD (torch's PixelShuffle): [N,C',b,b,H,W] with perm (0,1,4,2,5,3). SpaceToDepth is the
// inverse of DCR: its gradient is DCR's forward through the same three steps.
void depth_to_space(GradContext& c, bool inverse) {
  const ir::TensorType& xt = c.input(0)->type;
  const ir::TensorType& yt = c.output(0)->type;
  const int64_t b = c.attr_int("blocksize", 0);
  const auto* mode_attr = c.node().attr("mode");
  const bool crd = !inverse && mode_attr && mode_attr->s == "CRD";
  // The depth side [N, C, H, W] and the space side [N, C', Hb, Wb].
  const auto& depth = *(inverse ? yt : xt).shape;
  const auto& space = *(inverse ? xt : yt).shape;
  if (depth.size() != 4 || b <= 0) c.fail("needs a 4-D input and a positive blocksize");
  const int64_t n = depth[0], cs = space[1], h = depth[2], w = depth[3];
  const std::vector<int64_t> blocks =
      crd ? std::vector<int64_t>{n, cs, b, b, h, w} : std::vector<int64_t>{n, b, b, cs, h, w};
  const std::vector<int64_t> perm =
      crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  std::vector<int64_t> inv(6), permuted(6);
  for (size_t i = 0; i < 6; ++i) {
    inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    permuted[i] = blocks[static_cast<size_t>(perm[i])];
  }
  ir::Value* dy = c.output_grad(0);
  auto step = [&](ir::Value* v, const std::vector<int64_t>& from, const std::vector<int64_t>& p,
                  const std::vector<int64_t>& to_shape) {
    std::vector<int64_t> moved(6);
    for (size_t i = 0; i < 6; ++i) moved[i] = from[static_cast<size_t>(p[i])];
    ir::Value* t = c.b.op("Transpose", {c.b.reshape(v, from)}, {dy->type.dtype, moved},
                          attrs(ir::Attribute::make_ints("perm", p)));
    return c.b.reshape(t, to_shape);
  };
  // DepthToSpace backward: space -> depth; SpaceToDepth backward: depth -> space.
  ir::Value* g = inverse ? step(dy, blocks, perm, *xt.shape) : step(dy, permuted, inv, *xt.shape);
  c.set_input_grad(0, g);
}

}  // namespace

void register_shape_gradients(GradientRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) r.add(op, reshape_like);
  r.add("Transpose", transpose);
  r.add("DepthToSpace", [](GradContext& c) { depth_to_space(c, false); });
  r.add("SpaceToDepth", [](GradContext& c) { depth_to_space(c, true); });
}

}  // namespace ampc::passes::autodiff
