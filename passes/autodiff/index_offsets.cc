#include "passes/autodiff/index_offsets.h"

namespace ampc::passes::autodiff {

using ir::Value;
using Shape = std::vector<int64_t>;

Value* wrapped_indices(GradBuilder& b, Value* idx, int64_t size) {
  idx = b.cast(idx, DType::kInt64);
  Value* negative =
      b.op("Less", {idx, b.scalar(0, DType::kInt64)}, {DType::kBool, idx->type.shape});
  Value* from_end =
      b.op("Add", {idx, b.scalar(static_cast<double>(size), DType::kInt64)}, idx->type);
  return b.op("Where", {negative, from_end, idx}, idx->type);
}

Value* out_of_range(GradBuilder& b, Value* idx, int64_t size) {
  idx = b.cast(idx, DType::kInt64);
  const ir::TensorType flags{DType::kBool, idx->type.shape};
  Value* low = b.op("Less", {idx, b.scalar(static_cast<double>(-size), DType::kInt64)}, flags);
  Value* high =
      b.op("GreaterOrEqual", {idx, b.scalar(static_cast<double>(size), DType::kInt64)}, flags);
  return b.op("Or", {low, high}, flags);
}

Value* past_end_where(GradBuilder& b, Value* bad, Value* offsets, int64_t past_end) {
  return b.op("Where", {bad, b.scalar(static_cast<double>(past_end), DType::kInt64), offsets},
              offsets->type);
}

Value* element_offsets(GradBuilder& b, const Shape& d, int64_t axis, Value* idx) {
  const Shape& s = *idx->type.shape;
  const auto a = static_cast<size_t>(axis);
  std::vector<int64_t> stride(d.size(), 1);
  for (size_t j = d.size(); j-- > 1;) stride[j - 1] = stride[j] * d[j];
  const ir::TensorType offsets{DType::kInt64, s};
  Value* flat =
      b.op("Mul",
           {wrapped_indices(b, idx, d[a]), b.scalar(static_cast<double>(stride[a]), DType::kInt64)},
           offsets);
  for (size_t j = 0; j < s.size(); ++j) {
    if (j == a || s[j] == 1) continue;
    std::vector<int64_t> along(static_cast<size_t>(s[j]));
    for (int64_t i = 0; i < s[j]; ++i) along[static_cast<size_t>(i)] = i * stride[j];
    Shape broadcast(s.size(), 1);
    broadcast[j] = s[j];
    flat = b.op("Add", {flat, b.reshape(b.ints(along), broadcast)}, offsets);
  }
  return flat;
}

std::optional<NdRows> nd_rows(GradBuilder& b, const Shape& d, Value* idx, size_t bd) {
  const Shape& s = *idx->type.shape;
  if (s.empty() || s.back() <= 0 || s.size() < bd + 1) return std::nullopt;
  const auto q = static_cast<size_t>(s.back());
  if (bd + q > d.size()) return std::nullopt;
  std::vector<int64_t> stride(bd + q, 1);
  for (size_t j = bd + q; j-- > 1;) stride[j - 1] = stride[j] * d[j];
  NdRows out;
  out.count = stride[0] * d[0];
  out.slice = ir::shape_numel(d) / out.count;
  const Shape tuples(s.begin(), s.end() - 1);
  const ir::TensorType row_type{DType::kInt64, tuples}, flag_type{DType::kBool, tuples};
  Value* row = nullptr;
  Value* bad = nullptr;
  for (size_t i = 0; i < q; ++i) {
    const int64_t size = d[bd + i];
    Value* c =
        q == 1 ? b.reshape(idx, tuples)
               : b.op("Gather", {idx, b.scalar(static_cast<double>(i), DType::kInt64)}, row_type,
                      attrs(ir::Attribute::make_int("axis", static_cast<int64_t>(tuples.size()))));
    Value* term = b.op(
        "Mul",
        {wrapped_indices(b, c, size), b.scalar(static_cast<double>(stride[bd + i]), DType::kInt64)},
        row_type);
    Value* outside = out_of_range(b, c, size);
    row = row ? b.op("Add", {row, term}, row_type) : term;
    bad = bad ? b.op("Or", {bad, outside}, flag_type) : outside;
  }
  for (size_t j = 0; j < bd; ++j) {
    if (s[j] == 1) continue;
    std::vector<int64_t> along(static_cast<size_t>(s[j]));
    for (int64_t i = 0; i < s[j]; ++i) along[static_cast<size_t>(i)] = i * stride[j];
    Shape broadcast(tuples.size(), 1);
    broadcast[j] = s[j];
    row = b.op("Add", {row, b.reshape(b.ints(along), broadcast)}, row_type);
  }
  out.rows = past_end_where(b, bad, row, out.count);
  return out;
}

}  // namespace ampc::passes::autodiff
