// Einsum over index loops: any equation with explicit or implicit output, ellipsis, repeated
// labels within an operand (diagonals), broadcasting of size-1 ellipsis dimensions. Products
// are accumulated in opmath (fp32 for the 16-bit floats) and rounded once.
#include <algorithm>
#include <cctype>
#include <map>

#include "kernels/cpu/blas.h"
#include "runtime/cpu/ops/elementwise_common.h"
#include "runtime/cpu/ops/tensor_common.h"

namespace ampc::rt::cpu {
namespace {

// A parsed operand: one label per dimension. Letters are their char codes; the dimensions an
// ellipsis covers get labels 256 + i, counted from the right so operands broadcast; an output
// term marks its ellipsis with -1.
using Labels = std::vector<int>;

Labels parse_term(const OpContext& ctx, const std::string& term, int64_t rank,
                  int64_t* ellipsis_rank) {
  Labels labels;
  const size_t dots = term.find("...");
  const std::string head = dots == std::string::npos ? term : term.substr(0, dots);
  const std::string tail = dots == std::string::npos ? "" : term.substr(dots + 3);
  for (char c : head + tail) {
    if (!std::isalpha(static_cast<unsigned char>(c)))
      ctx.fail("equation term '" + term + "' has an invalid label");
  }
  const int64_t letters = static_cast<int64_t>(head.size() + tail.size());
  const int64_t e = dots == std::string::npos ? 0 : rank - letters;
  if (rank >= 0 && (e < 0 || (dots == std::string::npos && letters != rank))) {
    ctx.fail("equation term '" + term + "' does not match an input of rank " +
             std::to_string(rank));
  }
  if (ellipsis_rank) *ellipsis_rank = std::max(*ellipsis_rank, e);
  for (char c : head) labels.push_back(static_cast<unsigned char>(c));
  if (rank < 0 && dots != std::string::npos) labels.push_back(-1);  // output: expanded later
  for (int64_t i = e; i > 0; --i) labels.push_back(256 + static_cast<int>(i - 1));
  for (char c : tail) labels.push_back(static_cast<unsigned char>(c));
  return labels;
}

bool has_label(const Labels& labels, int l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}

int64_t dim_of(const OpContext& ctx, const std::vector<Labels>& in, int i, int l) {
  const Labels& ls = in[static_cast<size_t>(i)];
  return ctx.in(i).dim(std::find(ls.begin(), ls.end(), l) - ls.begin());
}

// Two float operands whose labels are each batch (both inputs and the output), m (first input
// and output), n (second input and output) or k (both inputs, summed): a batched GEMM through
// BLAS on transposed copies, in fp32 (fp64 for double) and rounded once to the input type.
// False when the equation has another form (diagonals, broadcasting, one-sided sums).
bool einsum_as_gemm(OpContext& ctx, const std::vector<Labels>& in, const Labels& out,
                    const Shape& out_shape) {
  if (in.size() != 2 || !is_float(ctx.in(0).dtype())) return false;
  for (int i = 0; i < 2; ++i) {
    for (int l : in[i]) {
      if (std::count(in[i].begin(), in[i].end(), l) != 1) return false;
      if (!has_label(in[1 - i], l) && !has_label(out, l)) return false;
      if (has_label(in[1 - i], l) && dim_of(ctx, in, i, l) != dim_of(ctx, in, 1 - i, l))
        return false;
    }
  }
  Labels batch, m, n, k;
  for (int l : out) {
    const bool in_a = has_label(in[0], l), in_b = has_label(in[1], l);
    (in_a && in_b ? batch : in_a ? m : n).push_back(l);
  }
  for (int l : in[0]) {
    if (!has_label(out, l)) k.push_back(l);
  }
  // Permutes input i to the label order `order`; returns the product of each group's sizes.
  auto arrange = [&](int i, std::vector<const Labels*> groups, std::vector<int64_t>* sizes) {
    std::vector<int64_t> perm;
    for (const Labels* g : groups) {
      int64_t p = 1;
      for (int l : *g) {
        perm.push_back(std::find(in[i].begin(), in[i].end(), l) - in[i].begin());
        p *= dim_of(ctx, in, i, l);
      }
      sizes->push_back(p);
    }
    const DType compute = ctx.in(i).dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    const Tensor converted = cast_tensor(ctx, ctx.in(i), compute);
    return transpose_view(converted, converted.shape(), perm);
  };
  std::vector<int64_t> sa, sb;
  const Tensor a = arrange(0, {&batch, &m, &k}, &sa);
  const Tensor b = arrange(1, {&batch, &k, &n}, &sb);
  const int64_t nb = sa[0], M = sa[1], K = sa[2], N = sb[2];
  Shape c_shape;
  for (const Labels* g : {&batch, &m, &n}) {
    for (int l : *g)
      c_shape.push_back(out_shape[std::find(out.begin(), out.end(), l) - out.begin()]);
  }
  Tensor c(a.dtype(), c_shape);
  for (int64_t i = 0; i < nb; ++i) {
    if (a.dtype() == DType::kFloat64) {
      kc::dgemm(false, false, M, N, K, 1.0, a.data<double>() + i * M * K, K,
                b.data<double>() + i * K * N, N, 0.0, c.data<double>() + i * M * N, N);
    } else {
      kc::sgemm(false, false, M, N, K, 1.0f, a.data<float>() + i * M * K, K,
                b.data<float>() + i * K * N, N, 0.0f, c.data<float>() + i * M * N, N);
    }
  }
  Labels c_labels = batch;
  c_labels.insert(c_labels.end(), m.begin(), m.end());
  c_labels.insert(c_labels.end(), n.begin(), n.end());
  std::vector<int64_t> perm;
  for (int l : out)
    perm.push_back(std::find(c_labels.begin(), c_labels.end(), l) - c_labels.begin());
  Tensor y = transpose_view(c, c_shape, perm);
  ctx.set_output(
      0, y.dtype() == ctx.in(0).dtype() ? std::move(y) : cast_tensor(ctx, y, ctx.in(0).dtype()));
  return true;
}

void einsum_op(OpContext& ctx) {
  std::string eq;
  for (char c : ctx.attr_string("equation", "")) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t b = 0;;) {
    const size_t comma = lhs.find(',', b);
    terms.push_back(lhs.substr(b, comma == std::string::npos ? std::string::npos : comma - b));
    if (comma == std::string::npos) break;
    b = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    ctx.fail("equation '" + eq + "' does not match the inputs");
  int64_t ellipsis_rank = 0;
  std::vector<Labels> in_labels;
  std::map<int, int64_t> size;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Tensor& t = ctx.in(static_cast<int>(i));
    if (t.dtype() != ctx.in(0).dtype()) ctx.fail("inputs have different element types");
    in_labels.push_back(parse_term(ctx, terms[i], t.rank(), &ellipsis_rank));
    for (size_t d = 0; d < in_labels[i].size(); ++d) {
      const int l = in_labels[i][d];
      ++count[l];
      const int64_t n = t.dim(static_cast<int64_t>(d));
      auto [it, fresh] = size.emplace(l, n);
      if (!fresh && it->second != n) {
        if (l >= 256 && (n == 1 || it->second == 1)) {
          it->second = std::max(it->second, n);
        } else {
          ctx.fail("label sizes disagree in equation '" + eq + "'");
        }
      }
    }
  }
  Labels out_labels;
  if (arrow != std::string::npos) {
    out_labels = parse_term(ctx, eq.substr(arrow + 2), -1, nullptr);
    // An explicit output ellipsis stands for all ellipsis dimensions.
    Labels fixed;
    for (int l : out_labels) {
      if (l == -1) {
        for (int64_t i = ellipsis_rank; i > 0; --i) fixed.push_back(256 + static_cast<int>(i - 1));
      } else {
        fixed.push_back(l);
      }
    }
    out_labels = fixed;
  } else {
    for (int64_t i = ellipsis_rank; i > 0; --i) out_labels.push_back(256 + static_cast<int>(i - 1));
    for (const auto& [l, c] : count) {
      if (l < 256 && c == 1) out_labels.push_back(l);
    }
  }
  Labels all = out_labels;
  for (const auto& [l, c] : count) {
    if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
  }
  Shape out_shape, loop_shape;
  for (int l : all) {
    if (!size.count(l)) ctx.fail("output label of '" + eq + "' does not appear in the inputs");
    loop_shape.push_back(size[l]);
  }
  out_shape.assign(loop_shape.begin(),
                   loop_shape.begin() + static_cast<int64_t>(out_labels.size()));
  if (einsum_as_gemm(ctx, in_labels, out_labels, out_shape)) return;
  // Per input, the stride of each loop label (summed over repeated labels; 0 when broadcast).
  std::vector<Shape> strides;
  for (size_t i = 0; i < in_labels.size(); ++i) {
    const Tensor& t = ctx.in(static_cast<int>(i));
    const Shape cs = kc::contiguous_strides(t.shape());
    Shape st(all.size(), 0);
    for (size_t d = 0; d < in_labels[i].size(); ++d) {
      if (t.dim(static_cast<int64_t>(d)) == 1) continue;
      st[std::find(all.begin(), all.end(), in_labels[i][d]) - all.begin()] += cs[d];
    }
    strides.push_back(st);
  }
  const int64_t out_n = numel_of(out_shape);
  const int64_t red_n =
      numel_of({loop_shape.begin() + static_cast<int64_t>(out_labels.size()), loop_shape.end()});
  if (!kc::visit_dtype<kc::kNumeric>(ctx.in(0).dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using M = kc::opmath_t<T>;
        Tensor& y = ctx.output(0, ctx.in(0).dtype(), out_shape);
        const size_t no = out_labels.size(), nl = all.size(), ni = in_labels.size();
        std::vector<int64_t> idx(nl), off(ni);
        for (int64_t o = 0; o < out_n; ++o) {
          // Output coordinates of o; reduction coordinates start at 0.
          int64_t rest = o;
          for (size_t d = no; d-- > 0;) {
            idx[d] = rest % loop_shape[d];
            rest /= loop_shape[d];
          }
          std::fill(idx.begin() + static_cast<int64_t>(no), idx.end(), 0);
          M acc = 0;
          for (int64_t r = 0; r < red_n; ++r) {
            M prod = 1;
            for (size_t i = 0; i < ni; ++i) {
              int64_t at = 0;
              for (size_t d = 0; d < nl; ++d) at += idx[d] * strides[i][d];
              prod = static_cast<M>(prod * kc::load(ctx.in(static_cast<int>(i)).data<T>()[at]));
            }
            acc = static_cast<M>(acc + prod);
            for (size_t d = nl; d-- > no;) {
              if (++idx[d] < loop_shape[d]) break;
              idx[d] = 0;
            }
          }
          y.data<T>()[o] = kc::store<T>(acc);
        }
      })) {
    ctx.unsupported_dtype(0);
  }
}

}  // namespace

void register_tensor_einsum(OpRegistry& r) {
  r.add("Einsum", einsum_op);
}

}  // namespace ampc::rt::cpu
