#include "lower/gemm_epilogue.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "runtime/plan/gemm_rules.h"

namespace ampc::lower {
namespace {

using ir::Node;
using ir::Value;

bool is_float32_or_64(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

bool is_onnx(const Node& n, const char* op) {
  return n.domain.empty() && n.op_type == op;
}

bool is_gemm_call(const Node& n) {
  return is_onnx(n, "MatMul") || is_onnx(n, "Gemm");
}

const std::vector<int64_t>* static_shape(const Value* v) {
  return v && v->type.is_static() ? &*v->type.shape : nullptr;
}

int64_t int_attr(const Node& n, const char* name, int64_t fallback) {
  const ir::Attribute* a = n.attr(name);
  return a ? a->i : fallback;
}

// The single reader of v, or null.
const Node* only_reader(const Value* v) {
  return v->uses.size() == 1 ? v->uses[0].node : nullptr;
}

bool is_last_two_swap(const Node& t) {
  const auto* shape = static_shape(t.inputs[0]);
  const ir::Attribute* perm = t.attr("perm");
  if (!shape || !perm || shape->size() < 2 || perm->ints.size() != shape->size()) return false;
  const size_t r = shape->size();
  for (size_t i = 0; i + 2 < r; ++i) {
    if (perm->ints[i] != static_cast<int64_t>(i)) return false;
  }
  return perm->ints[r - 2] == static_cast<int64_t>(r - 1) &&
         perm->ints[r - 1] == static_cast<int64_t>(r - 2);
}

const std::vector<int64_t>* permutation(const Node& t) {
  const auto* shape = static_shape(t.inputs[0]);
  const ir::Attribute* perm = t.attr("perm");
  if (!shape || !perm || perm->ints.size() != shape->size()) return nullptr;
  return &perm->ints;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// A Transpose the CPU's oneDNN can read as a strided operand (lower/gemm_epilogue.h): rank 3
// or more, not the identity nor a swap of the last two axes (trans_a / trans_b take those),
// with the input's innermost axis still among the view's last two (one unit stride there).
bool operand_view_foldable(const Node& t) {
  const auto* perm = permutation(t);
  if (!perm || perm->size() < 3 || is_identity(*perm) || is_last_two_swap(t)) return false;
  const int64_t last = static_cast<int64_t>(perm->size()) - 1;
  return perm->back() == last || (*perm)[perm->size() - 2] == last;
}

// A Transpose the CPU's oneDNN can write a MatMul's result through: rank 3 or more, not the
// identity, the stored innermost axis one of the result's last two (its rows contiguous, or
// its columns: then the call computes the transposed product, B^T A^T).
bool result_view_foldable(const Node& t) {
  const auto* perm = permutation(t);
  const int64_t last = perm ? static_cast<int64_t>(perm->size()) - 1 : 0;
  return perm && perm->size() >= 3 && !is_identity(*perm) &&
         (perm->back() == last || perm->back() == last - 1);
}

class Finder {
 public:
  Finder(const ir::Model& model, const GemmFoldOptions& options)
      : g_(*model.graph), options_(options) {
    for (size_t i = 0; i < g_.nodes.size(); ++i) position_[g_.nodes[i].get()] = i;
    pinned_.insert(g_.outputs.begin(), g_.outputs.end());
    for (const auto& u : model.state_updates) pinned_.insert(u.source);
  }

  std::vector<GemmFold> run() {
    std::vector<GemmFold> folds;
    std::unordered_map<const Node*, size_t> fold_of;
    for (const auto& np : g_.nodes) {
      if (!is_gemm_call(*np)) continue;
      GemmFold f;
      f.gemm = np.get();
      f.inputs.assign(np->inputs.begin(), np->inputs.end());
      f.outputs.assign(np->outputs.begin(), np->outputs.end());
      fold_transposes(f);
      fold_bias(f);
      fold_relu(f);
      fold_result_transpose(f);
      if (f.epilogue != plan::GemmParams::NONE || f.trans_a || f.trans_b || !f.perm_a.empty() ||
          !f.perm_b.empty() || !f.perm_y.empty()) {
        fold_of[f.gemm] = folds.size();
        folds.push_back(std::move(f));
      } else {
        plain_.push_back(np.get());
      }
    }
    // Bias gradients, on GEMMs with nothing else in their epilogue.
    for (const auto& np : g_.nodes) {
      if (!is_onnx(*np, "ReduceSum") || taken_.count(np.get())) continue;
      if (const Node* m = bias_grad_gemm(*np)) {
        auto it = fold_of.find(m);
        if (it == fold_of.end()) {
          GemmFold f;
          f.gemm = m;
          f.inputs.assign(m->inputs.begin(), m->inputs.end());
          f.outputs.assign(m->outputs.begin(), m->outputs.end());
          it = fold_of.emplace(m, folds.size()).first;
          folds.push_back(std::move(f));
        }
        GemmFold& f = folds[it->second];
        if (f.epilogue != plan::GemmParams::NONE || f.outputs.size() != 1) continue;
        f.epilogue = plan::GemmParams::BGRADB;
        f.outputs.push_back(np->outputs[0]);
        f.folded.push_back(np.get());
        taken_.insert(np.get());
      }
    }
    std::sort(folds.begin(), folds.end(), [&](const GemmFold& a, const GemmFold& b) {
      return position_.at(a.gemm) < position_.at(b.gemm);
    });
    return folds;
  }

 private:
  bool foldable(const Value* v, const Node& reader) const {
    return only_reader(v) == &reader && !pinned_.count(v);
  }

  // A transpose read only by GEMMs, as their A or B operand: each of them folds it (a Linear
  // layer's W^T is read by the forward GEMM and by the backward one for the input gradient).
  // Lowering keeps it as a step of its own where one of those GEMMs is not folded after all.
  bool transpose_foldable(const Value* v) const {
    if (pinned_.count(v) || v->uses.empty()) return false;
    for (const ir::Use& u : v->uses) {
      if (!is_gemm_call(*u.node) || u.input_index > 1) return false;
    }
    return true;
  }

  void fold_transposes(GemmFold& f) {
    for (int k = 0; k < 2; ++k) {
      const Value* v = f.inputs[k];
      const Node* t = v->producer;
      // A transpose that an earlier GEMM writes its result through is not there to read.
      if (!t || !is_onnx(*t, "Transpose") || !transpose_foldable(v) || result_views_.count(t))
        continue;
      if (is_last_two_swap(*t)) {
        (k == 0 ? f.trans_a : f.trans_b) = true;
      } else if (options_.strided_views && is_onnx(*f.gemm, "MatMul") &&
                 operand_view_foldable(*t)) {
        (k == 0 ? f.perm_a : f.perm_b) = *permutation(*t);
      } else {
        continue;
      }
      f.inputs[k] = t->inputs[0];
      f.folded.push_back(t);
      taken_.insert(t);
    }
  }

  // MatMul -> Transpose (its only reader): the call writes the transposed result.
  void fold_result_transpose(GemmFold& f) {
    if (!options_.strided_views || !is_onnx(*f.gemm, "MatMul") ||
        f.epilogue != plan::GemmParams::NONE)
      return;
    const Value* y = f.outputs[0];
    const Node* t = only_reader(y);
    if (!t || !is_onnx(*t, "Transpose") || !foldable(y, *t) || !result_view_foldable(*t) ||
        taken_.count(t))
      return;
    f.perm_y = *permutation(*t);
    f.outputs[0] = t->outputs[0];
    f.folded.push_back(t);
    taken_.insert(t);
    result_views_.insert(t);
  }

  // MatMul(X, W) + b -> MatMul[BIAS](X, W, b); Gemm's own 1-D C recorded as BIAS.
  void fold_bias(GemmFold& f) {
    const Value* y = f.outputs[0];
    const auto* ys = static_shape(y);
    if (!ys || ys->empty() || !is_float32_or_64(y->type.dtype)) return;
    if (is_onnx(*f.gemm, "Gemm")) {
      const Value* c = f.inputs.size() > 2 ? f.inputs[2] : nullptr;
      const auto* cs = static_shape(c);
      const ir::Attribute* beta = f.gemm->attr("beta");
      if (cs && cs->size() == 1 && (*cs)[0] == ys->back() && (!beta || beta->f == 1.0f))
        f.epilogue = plan::GemmParams::BIAS;
      return;
    }
    const Node* add = only_reader(y);
    if (!add || !is_onnx(*add, "Add") || !foldable(y, *add)) return;
    const Value* b = add->inputs[add->inputs[0] == y ? 1 : 0];
    const auto* bs = static_shape(b);
    if (b == y || !bs || bs->size() != 1 || (*bs)[0] != ys->back() ||
        b->type.dtype != y->type.dtype || add->outputs[0]->type != y->type ||
        (b->producer && position_.at(b->producer) > position_.at(f.gemm)))
      return;
    f.inputs.push_back(b);
    f.outputs[0] = add->outputs[0];
    f.folded.push_back(add);
    taken_.insert(add);
    f.epilogue = plan::GemmParams::BIAS;
  }

  // GEMM[BIAS] -> Relu: RELU_BIAS (RELU without a bias). After a bf16 GEMM only where the
  // options say (gemm_epilogue.h); a Gemm's own C is then its operand, not a BIAS epilogue.
  void fold_relu(GemmFold& f) {
    if (f.epilogue != plan::GemmParams::NONE && f.epilogue != plan::GemmParams::BIAS) return;
    const Value* y = f.outputs[0];
    const Node* relu = only_reader(y);
    const DType t = y->type.dtype;
    const bool type_ok = is_float32_or_64(t) || (options_.relu_after_bf16 && t == DType::kBFloat16);
    if (!relu || !is_onnx(*relu, "Relu") || !foldable(y, *relu) || !type_ok ||
        relu->outputs[0]->type != y->type)
      return;
    f.outputs[0] = relu->outputs[0];
    f.folded.push_back(relu);
    taken_.insert(relu);
    f.epilogue =
        f.epilogue == plan::GemmParams::NONE ? plan::GemmParams::RELU : plan::GemmParams::RELU_BIAS;
  }

  // ReduceSum(D, axes [0], keepdims 0) with D [K, N] the (untransposed) B operand of a GEMM
  // that runs before every reader of the sum.
  const Node* bias_grad_gemm(const Node& r) const {
    const Value* d = r.inputs[0];
    const auto* ds = static_shape(d);
    // A 2-D operand only: cuBLASLt's BGRADB sums the rows of one matrix, not across a batch.
    if (!ds || ds->size() != 2 || int_attr(r, "keepdims", 1) != 0 || r.outputs.size() != 1 ||
        !reduces_rows(r))
      return nullptr;
    const Value* s = r.outputs[0];
    for (const ir::Use& u : d->uses) {
      const Node& m = *u.node;
      if (u.input_index != 1 || !is_gemm_call(m) || m.outputs.size() != 1) continue;
      const bool has_c = m.inputs.size() > 2 && m.inputs[2] != nullptr;
      if (!plan::bias_grad_b_foldable(d->type.dtype, s->type.dtype, ds->size(),
                                      int_attr(m, "transB", 0) != 0, has_c))
        continue;
      if (std::find(plain_.begin(), plain_.end(), &m) == plain_.end()) continue;
      bool ordered = true;
      for (const ir::Use& su : s->uses) ordered &= position_.at(su.node) > position_.at(&m);
      if (ordered) return &m;
    }
    return nullptr;
  }

  static bool reduces_rows(const Node& r) {
    std::vector<int64_t> axes;
    if (r.inputs.size() > 1 && r.inputs[1]) {
      const Value* a = r.inputs[1];
      if (!a->initializer || a->initializer->dtype != DType::kInt64) return false;
      axes.resize(static_cast<size_t>(a->initializer->numel()));
      std::copy_n(reinterpret_cast<const int64_t*>(a->initializer->bytes.data()), axes.size(),
                  axes.data());
    } else if (const ir::Attribute* at = r.attr("axes")) {
      axes = at->ints;
    } else {
      return false;
    }
    return axes.size() == 1 && (axes[0] == 0 || axes[0] == -2);
  }

  const ir::Graph& g_;
  const GemmFoldOptions options_;
  std::unordered_map<const Node*, size_t> position_;
  std::unordered_set<const Node*> result_views_;  // transposes a GEMM writes its result through
  std::unordered_set<const Value*> pinned_;
  std::unordered_set<const Node*> taken_;
  std::vector<const Node*> plain_;  // GEMMs with nothing folded by the first sweep
};

}  // namespace

std::vector<GemmFold> find_gemm_folds(const ir::Model& model, const GemmFoldOptions& options) {
  return Finder(model, options).run();
}

}  // namespace ampc::lower
