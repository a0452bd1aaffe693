#include "runtime/plan/step_params.h"

#include <string>

#include "base/error.h"

namespace ampc::plan {
namespace {

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) p *= dims[i];
  return p;
}

}  // namespace

std::optional<DType> fill_dtype(const FillParams& p) {
  const auto dtype = static_cast<DType>(p.dtype());
  if (!dtype_is_known(p.dtype()) || dtype == DType::kString ||
      p.value().size() != dtype_size(dtype))
    return std::nullopt;
  return dtype;
}

RowShape row_shape(const RowwiseParams& p, const std::vector<int64_t>& dims) {
  const auto axis = static_cast<size_t>(p.axis());
  if (p.flatten() || axis >= dims.size())
    return {product(dims, 0, axis), product(dims, axis, dims.size()), 1};
  return {product(dims, 0, axis), dims[axis], product(dims, axis + 1, dims.size())};
}

const google::protobuf::FieldDescriptor* params_field(const google::protobuf::Descriptor* type) {
  const google::protobuf::OneofDescriptor* oneof = Step::descriptor()->FindOneofByName("params");
  for (int i = 0; i < oneof->field_count(); ++i) {
    if (oneof->field(i)->message_type() == type) return oneof->field(i);
  }
  throw Error("internal: " + type->name() + " is not a kind of Step.params");
}

void missing_params(const Step& step) {
  const std::string node = step.source_nodes().empty() ? "?" : step.source_nodes(0);
  throw Error("node '" + node + "' (" + step.op() +
              "): the plan step has no typed parameters (it was not legalized)");
}

std::optional<std::vector<bool>> reduced_axes(const ReduceParams& p, int64_t rank,
                                              const std::vector<int64_t>& axes_input) {
  const std::vector<int64_t> axes =
      p.runtime_axes() ? axes_input : std::vector<int64_t>(p.axes().begin(), p.axes().end());
  if (axes.empty() && p.noop_with_empty_axes()) return std::nullopt;
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      throw Error("reduction axis " + std::to_string(a) + " is out of range for rank " +
                  std::to_string(rank));
    }
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  return reduced;
}

std::vector<int64_t> reduced_dims(const ReduceParams& p, const std::vector<bool>& reduced,
                                  const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(dims[i]);
    } else if (p.keep_dims()) {
      out.push_back(1);
    }
  }
  return out;
}

std::string gemm_epilogue_name(const Step& step) {
  if (!step.has_gemm() || step.gemm().epilogue() == GemmParams::NONE) return "";
  const std::string name = GemmParams::Epilogue_Name(step.gemm().epilogue());
  // A value this build does not know (a plan of a newer ampc): its number.
  return name.empty() ? "#" + std::to_string(step.gemm().epilogue()) : name;
}

}  // namespace ampc::plan
