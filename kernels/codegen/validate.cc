// validate_kernel: a KernelDef checked against the instruction set before any IR is built,
// so that an unsupported kernel fails with a message naming the instruction.
#include <string>

#include "base/error.h"
#include "kernels/codegen/instr_set.h"

namespace ampc::kernels::codegen {
namespace {

std::string where(const KernelDef& k, int i) {
  return "kernel '" + k.name() + "' instruction " + std::to_string(i) + " ('" + k.body(i).op() +
         "')";
}

// The argument dtypes an instruction accepts (ampc::Error otherwise).
void check_args(const KernelDef& k, int i) {
  const Instr& in = k.body(i);
  const std::string& op = in.op();
  auto dt = [&](int n) { return k.body(in.args(n)).dtype(); };
  auto fail = [&](const std::string& why) { throw Error(where(k, i) + ": " + why); };
  const bool bool_result = op == "not" || op == "and" || op == "or" || op == "xor" ||
                           op == "isnan" || op == "isinf" || kCompare.count(op);
  if (bool_result && in.dtype() != kBool) fail("the result must be bool");
  if (op == "not" || op == "and" || op == "or" || op == "xor") {
    for (int n = 0; n < in.args_size(); ++n)
      if (dt(n) != kBool) fail("operands must be bool");
  } else if (op == "isnan" || op == "isinf") {
    if (!is_float(dt(0))) fail("the operand must be a float type");
  } else if (kCompare.count(op)) {
    if (dt(0) != dt(1)) fail("operands must have one dtype");
    if (!is_float(dt(0)) && !(op == "equal" && dt(0) == kBool)) fail("operands must be floats");
  } else if (op == "where") {
    if (dt(0) != kBool) fail("the condition must be bool");
    if (dt(1) != in.dtype() || dt(2) != in.dtype()) fail("operands must have the result dtype");
  } else if (op == "pow") {
    if (!is_float(in.dtype()) || dt(0) != in.dtype() || !is_float(dt(1)))
      fail("the base must be a float of the result dtype, the exponent a float");
  } else if (op != "cast" && op != "load" && op != "const") {
    if (!is_float(in.dtype())) fail("the result must be a float type");
    for (int n = 0; n < in.args_size(); ++n)
      if (dt(n) != in.dtype()) fail("operands must have the result dtype");
  }
}

}  // namespace

void validate_kernel(const KernelDef& k) {
  const std::string name = "kernel '" + k.name() + "'";
  if (k.body_size() == 0) throw Error(name + " has no instructions");
  if (k.outputs_size() == 0) throw Error(name + " has no outputs");
  for (int j = 0; j < k.inputs_size(); ++j) {
    const Operand& op = k.inputs(j);
    if (!supported_dtype(op.dtype())) {
      throw Error(name + " input " + std::to_string(j) + ": element type " +
                  std::to_string(op.dtype()) + " is not supported by the code generator");
    }
    if (strided(op) && (k.flat() || op.strides_size() != k.shape_size())) {
      throw Error(name + " input " + std::to_string(j) + ": strides do not match the shape" +
                  (k.flat() ? " (a flat kernel takes full or scalar operands)" : ""));
    }
  }
  for (int64_t d : k.shape()) {
    if (d < 0) throw Error(name + " has a negative dimension");
  }
  for (int i = 0; i < k.body_size(); ++i) {
    const Instr& in = k.body(i);
    const int n = arity(in.op());
    if (n < 0) throw Error(where(k, i) + ": the code generator does not know this instruction");
    if (!supported_dtype(in.dtype())) {
      throw Error(where(k, i) + ": element type " + std::to_string(in.dtype()) +
                  " is not supported by the code generator");
    }
    if (in.args_size() != n) {
      throw Error(where(k, i) + ": takes " + std::to_string(n) + " arguments, not " +
                  std::to_string(in.args_size()));
    }
    for (int a : in.args()) {
      if (a < 0 || a >= i)
        throw Error(where(k, i) + ": argument " + std::to_string(a) +
                    " is not an earlier instruction");
    }
    if (in.op() == "load") {
      if (in.operand() < 0 || in.operand() >= k.inputs_size())
        throw Error(where(k, i) + ": no input " + std::to_string(in.operand()));
      if (k.inputs(in.operand()).dtype() != in.dtype())
        throw Error(where(k, i) + ": dtype differs from the input's");
    }
    check_args(k, i);
  }
  for (int i : k.outputs()) {
    if (i < 0 || i >= k.body_size())
      throw Error(name + ": output of no instruction " + std::to_string(i));
  }
  if (k.guard() != 0) {
    const int g = k.guard() - 1;
    if (g < 0 || g >= k.inputs_size() || !k.inputs(g).scalar() || k.inputs(g).dtype() != kBool)
      throw Error(name + ": the guard must be a scalar bool input");
  }
}

int64_t strided_extent(const KernelDef& kernel, const Operand& operand) {
  int64_t extent = 1;
  for (int d = 0; d < kernel.shape_size(); ++d) {
    if (kernel.shape(d) == 0) return 0;
    extent += (kernel.shape(d) - 1) * operand.strides(d);
  }
  return extent;
}

}  // namespace ampc::kernels::codegen
