#include "runtime/cpu/op_context.h"

#include <cstring>

namespace ampc::rt::cpu {

const Tensor& OpContext::in(int i) const {
  const Tensor* t = input(i);
  if (!t) fail("input " + std::to_string(i) + " is required");
  return *t;
}

Tensor* OpContext::placed(int i, DType dtype, const std::vector<int64_t>& shape) const {
  if (!has_output(i)) return nullptr;
  Tensor* t = outputs_[i];
  return t->is_borrowed() && t->dtype() == dtype && t->shape() == shape ? t : nullptr;
}

bool OpContext::overlaps_input(const Tensor& t) const {
  const auto* lo = static_cast<const uint8_t*>(t.raw());
  const auto* hi = lo + t.nbytes();
  for (const Tensor* in : inputs_) {
    if (!in || in->nbytes() == 0) continue;
    const auto* a = static_cast<const uint8_t*>(in->raw());
    if (a < hi && lo < a + in->nbytes()) return true;
  }
  return false;
}

Tensor* OpContext::placed_apart(int i, DType dtype, const std::vector<int64_t>& shape) const {
  Tensor* t = placed(i, dtype, shape);
  return t && !overlaps_input(*t) ? t : nullptr;
}

Tensor& OpContext::output(int i, DType dtype, std::vector<int64_t> shape) {
  if (Tensor* t = placed(i, dtype, shape)) {
    if (!overlaps_input(*t) && t->nbytes() > 0) std::memset(t->raw(), 0, t->nbytes());
    return *t;
  }
  // An omitted output still gets storage of its own (the op may write it), kept in a map
  // so that references to several of them stay valid together.
  Tensor& slot = has_output(i) ? *outputs_[i] : discarded_[i];
  slot = Tensor(dtype, std::move(shape));
  return slot;
}

Tensor& OpContext::output_for_overwrite(int i, DType dtype, std::vector<int64_t> shape) {
  if (Tensor* t = placed(i, dtype, shape)) return *t;
  return output(i, dtype, std::move(shape));
}

Tensor& OpContext::output_copy_of_input(int i, int input) {
  const Tensor& x = in(input);
  if (x.dtype() == DType::kString) {
    Tensor& y = output(i, x.dtype(), x.shape());
    y.strings() = x.strings();
    return y;
  }
  Tensor& y = output_for_overwrite(i, x.dtype(), x.shape());
  if (y.raw() != x.raw() && x.nbytes() > 0) std::memmove(y.raw(), x.raw(), x.nbytes());
  return y;
}

void OpContext::set_output(int i, Tensor t) {
  if (!has_output(i)) return;
  if (Tensor* slot = placed(i, t.dtype(), t.shape())) {
    if (slot->raw() != t.raw() && t.nbytes() > 0) std::memmove(slot->raw(), t.raw(), t.nbytes());
    return;
  }
  *outputs_[i] = std::move(t);
}

const plan::Attribute* OpContext::find(const std::string& name) const {
  for (const auto& a : step_.attributes()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

const plan::Attribute* OpContext::find_of_kind(const std::string& name,
                                               plan::Attribute::ValueCase kind,
                                               const char* kind_name) const {
  const auto* a = find(name);
  if (a && a->value_case() != kind) fail("attribute '" + name + "' is not " + kind_name);
  return a;
}

int64_t OpContext::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = find_of_kind(name, plan::Attribute::kI, "an int");
  return a ? a->i() : fallback;
}

int64_t OpContext::attr_int(const std::string& name) const {
  if (!find(name)) fail("attribute '" + name + "' is required");
  return attr_int(name, 0);
}

float OpContext::attr_float(const std::string& name, float fallback) const {
  const auto* a = find_of_kind(name, plan::Attribute::kF, "a float");
  return a ? a->f() : fallback;
}

std::string OpContext::attr_string(const std::string& name, const std::string& fallback) const {
  const auto* a = find_of_kind(name, plan::Attribute::kS, "a string");
  return a ? a->s() : fallback;
}

std::vector<int64_t> OpContext::attr_ints(const std::string& name,
                                          std::vector<int64_t> fallback) const {
  const auto* a = find_of_kind(name, plan::Attribute::kInts, "a list of ints");
  if (!a) return fallback;
  return {a->ints().v().begin(), a->ints().v().end()};
}

std::vector<float> OpContext::attr_floats(const std::string& name,
                                          std::vector<float> fallback) const {
  const auto* a = find_of_kind(name, plan::Attribute::kFloats, "a list of floats");
  if (!a) return fallback;
  return {a->floats().v().begin(), a->floats().v().end()};
}

std::vector<std::string> OpContext::attr_strings(const std::string& name) const {
  const auto* a = find_of_kind(name, plan::Attribute::kStrings, "a list of strings");
  if (!a) return {};
  return {a->strings().v().begin(), a->strings().v().end()};
}

std::optional<Tensor> OpContext::attr_tensor(const std::string& name) const {
  const auto* a = find_of_kind(name, plan::Attribute::kT, "a tensor");
  if (!a) return std::nullopt;
  return tensor_from_data(a->t());
}

std::string OpContext::label() const {
  std::string who = step_.source_nodes_size() ? step_.source_nodes(0) : std::string("?");
  return "node '" + who + "' (" + (step_.domain().empty() ? "" : step_.domain() + ".") +
         step_.op() + ")";
}

void OpContext::fail(const std::string& what) const {
  throw Error(label() + ": " + what);
}

void OpContext::unsupported_dtype(int input_index) const {
  const Tensor* t = input(input_index);
  fail("element type " + std::string(t ? dtype_name(t->dtype()) : "?") + " of input " +
       std::to_string(input_index) + " is not supported by the CPU backend");
}

Tensor tensor_from_data(const plan::TensorData& data) {
  Tensor t(static_cast<DType>(data.dtype()), {data.dims().begin(), data.dims().end()});
  if (t.dtype() == DType::kString) {
    for (int i = 0; i < data.strings_size() && i < static_cast<int>(t.strings().size()); ++i) {
      t.strings()[i] = data.strings(i);
    }
  } else if (data.zeros()) {
    // The tensor is zero-filled already.
    if (!data.data().empty())
      throw Error("plan tensor data of " + t.type_str() + " is marked all-zero but has bytes");
  } else {
    if (data.data().size() != t.nbytes()) {
      throw Error("plan tensor data has " + std::to_string(data.data().size()) + " bytes for " +
                  t.type_str());
    }
    // An empty tensor's storage may be null, which memcpy must not be given.
    if (t.nbytes() > 0) std::memcpy(t.raw(), data.data().data(), t.nbytes());
  }
  return t;
}

double float_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i];
    case DType::kFloat64:
      return t.data<double>()[i];
    case DType::kFloat16:
      return half_to_float(t.data<Half>()[i]);
    case DType::kBFloat16:
      return bf16_to_float(t.data<BFloat16>()[i]);
    default:
      throw Error("float_element: " + t.type_str() + " is not a float tensor");
  }
}

std::vector<int64_t> int_values(const OpContext& ctx, int input) {
  const Tensor& t = ctx.in(input);
  if (t.dtype() == DType::kInt64) return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
  if (t.dtype() == DType::kInt32) return {t.data<int32_t>(), t.data<int32_t>() + t.numel()};
  ctx.unsupported_dtype(input);
}

int64_t normalize_axis(const OpContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace ampc::rt::cpu
