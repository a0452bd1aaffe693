// The per-element body of a kernel as LLVM IR: each instruction computes in its opmath type
// and rounds once to its dtype, as the CPU ops' store<T>(f(load(x))). Shared by the host and
// NVPTX drivers; internal to kernels/codegen (only ir_builder.cc includes it).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/codegen/instr_set.h"
#include "kernels/codegen/ir_builder.h"
#include "kernels/codegen/ir_convert.h"
#include "kernels/shared/float_math.h"

namespace ampc::kernels::codegen {

using llvm::Value;

// Emits a kernel's body for one element (emit) at the builder's insertion point; the values
// of the instructions are kept as stored (i16 bits for the 16-bit floats, i1 for bool) and
// widened to opmath on first use.
class BodyBuilder {
 public:
  BodyBuilder(llvm::IRBuilder<>& b, llvm::Module& m, const KernelDef& k, Target t)
      : b_(b), m_(m), k_(k), target_(t) {}

  // One element: input j read at offsets[j] from inputs[j]; output o stored at `index`.
  // `group`, when set, is the access group of the loop's parallel accesses.
  void emit(const std::vector<Value*>& inputs, const std::vector<Value*>& offsets,
            const std::vector<Value*>& outputs, Value* index, llvm::MDNode* group) {
    group_ = group;
    stored_.assign(k_.body_size(), nullptr);
    opmath_.assign(k_.body_size(), nullptr);
    for (int i = 0; i < k_.body_size(); ++i) {
      const Instr& in = k_.body(i);
      if (in.op() == "load") {
        const int j = in.operand();
        Value* p = b_.CreateInBoundsGEP(memory_type(in.dtype()), inputs[j], offsets[j]);
        Value* v = mark(b_.CreateLoad(memory_type(in.dtype()), p));
        stored_[i] = in.dtype() == kBool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
      } else {
        rounded_opmath_ = nullptr;
        stored_[i] = compute(i);
        opmath_[i] = rounded_opmath_;  // set where compute rounded to bf16: no widening needed
      }
    }
    for (int o = 0; o < k_.outputs_size(); ++o) {
      const int i = k_.outputs(o);
      const int dt = k_.body(i).dtype();
      Value* v = dt == kBool ? b_.CreateZExt(stored_[i], b_.getInt8Ty()) : stored_[i];
      mark(b_.CreateStore(v, b_.CreateInBoundsGEP(memory_type(dt), outputs[o], index)));
    }
  }

  llvm::Type* memory_type(int dtype) const {
    switch (dtype) {
      case kF16:
      case kBF16:
        return b_.getInt16Ty();
      case kF32:
        return b_.getFloatTy();
      case kF64:
        return b_.getDoubleTy();
      default:
        return b_.getInt8Ty();
    }
  }

 private:
  template <typename I>
  I* mark(I* inst) {
    if (group_) inst->setMetadata(llvm::LLVMContext::MD_access_group, group_);
    return inst;
  }

  llvm::Type* opmath_type(int dtype) const {
    if (dtype == kBool) return b_.getInt1Ty();
    return dtype == kF64 ? b_.getDoubleTy() : b_.getFloatTy();
  }

  // The value of instruction i in its opmath type (the CPU ops' load()), computed once.
  Value* opmath(int i) {
    if (!opmath_[i]) {
      Value* s = stored_[i];
      switch (k_.body(i).dtype()) {
        case kF16:
          opmath_[i] = convert::half_to_float(b_, s);
          break;
        case kBF16:
          opmath_[i] = convert::bf16_to_float(b_, s);
          break;
        default:
          opmath_[i] = s;
      }
    }
    return opmath_[i];
  }

  // v (float, double or i1) rounded once to `dtype`, as the CPU ops' store<T>(v).
  Value* round_to(Value* v, int dtype) {
    llvm::Type* t = v->getType();
    if (dtype == kBool) {
      if (t->isIntegerTy(1)) return v;
      return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(t, 0.0));  // v != 0: NaN is true
    }
    if (t->isIntegerTy(1)) {
      v = b_.CreateUIToFP(v, opmath_type(dtype));
      t = v->getType();
    }
    switch (dtype) {
      case kF64:
        return t->isDoubleTy() ? v : b_.CreateFPExt(v, b_.getDoubleTy());
      case kF32:
        return t->isFloatTy() ? v : b_.CreateFPTrunc(v, b_.getFloatTy());
      default: {
        Value* f = t->isFloatTy() ? v : convert::double_to_float_odd(b_, v);
        if (dtype == kF16) return convert::float_to_half(b_, f);
        Value* bits = convert::bf16_rounded_bits(b_, f);
        rounded_opmath_ = b_.CreateBitCast(bits, b_.getFloatTy());
        return b_.CreateTrunc(b_.CreateLShr(bits, 16), b_.getInt16Ty());
      }
    }
  }

  // v converted exactly or by C++ conversion to the floating type `to` (pow's exponent).
  Value* to_float_type(Value* v, llvm::Type* to) {
    if (v->getType() == to) return v;
    return to->isDoubleTy() ? b_.CreateFPExt(v, to) : b_.CreateFPTrunc(v, to);
  }

  llvm::Constant* fconst(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

  Value* intrinsic(llvm::Intrinsic::ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

  // A C library function (host) or libdevice's (NVPTX): expf/exp, logf/log, ... The host calls
  // are `nobuiltin` so LLVM neither folds nor rewrites them: the result is that of the very
  // function the CPU ops call.
  Value* libm(const std::string& name, std::vector<Value*> args) {
    llvm::Type* t = args[0]->getType();
    std::string symbol = t->isFloatTy() ? name + "f" : name;
    if (target_ == Target::kNvptx) symbol = "__nv_" + symbol;
    std::vector<llvm::Type*> params(args.size(), t);
    llvm::FunctionCallee fn =
        m_.getOrInsertFunction(symbol, llvm::FunctionType::get(t, params, false));
    llvm::CallInst* call = b_.CreateCall(fn, args);
    if (target_ == Target::kHost) call->addFnAttr(llvm::Attribute::NoBuiltin);
    call->addFnAttr(llvm::Attribute::NoUnwind);
    call->addFnAttr(llvm::Attribute::WillReturn);
    call->addFnAttr(
        llvm::Attribute::getWithMemoryEffects(b_.getContext(), llvm::MemoryEffects::none()));
    return call;
  }

  Value* isnan(Value* x) { return b_.CreateFCmpUNO(x, x); }

  // kernels/shared/float_math.h's exp_f32, erf_f32 and tanh_f32, operation for operation (the CPU
  // ops, the row-wise CUDA kernels and their twins call those), inline: no call, so the loop
  // vectorises. Both targets build without FP contraction (host_jit.cc, ptx.cc).
  llvm::Constant* f32(float v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }

  template <int N>
  Value* horner(const float (&c)[N], Value* x) {
    Value* p = f32(c[0]);
    for (int i = 1; i < N; ++i) p = b_.CreateFAdd(b_.CreateFMul(p, x), f32(c[i]));
    return p;
  }

  Value* pow2i(Value* k) {
    Value* bits = b_.CreateShl(b_.CreateAdd(k, b_.getInt32(127)), 23);
    return b_.CreateBitCast(bits, b_.getFloatTy());
  }

  Value* exp_f32(Value* x) {
    namespace fm = kernels::fmath;
    Value* c = b_.CreateSelect(b_.CreateFCmpOLT(x, f32(fm::kExpLow)), f32(fm::kExpLow), x);
    c = b_.CreateSelect(b_.CreateFCmpOGT(c, f32(fm::kExpHigh)), f32(fm::kExpHigh), c);
    Value* t = b_.CreateFAdd(b_.CreateFMul(c, f32(fm::kExpLog2e)), f32(fm::kExpShift));
    Value* n = b_.CreateFSub(t, f32(fm::kExpShift));
    Value* ni = b_.CreateSub(b_.CreateBitCast(t, b_.getInt32Ty()), b_.getInt32(fm::kExpShiftBits));
    Value* r = b_.CreateFSub(b_.CreateFSub(c, b_.CreateFMul(n, f32(fm::kExpLn2Hi))),
                             b_.CreateFMul(n, f32(fm::kExpLn2Lo)));
    Value* p = horner(fm::kExpPoly, r);
    Value* n1 = b_.CreateAShr(ni, 1);
    Value* y = b_.CreateFMul(b_.CreateFMul(p, pow2i(n1)), pow2i(b_.CreateSub(ni, n1)));
    Value* quiet = b_.CreateOr(b_.CreateBitCast(x, b_.getInt32Ty()), b_.getInt32(0x00400000));
    return b_.CreateSelect(isnan(x), b_.CreateBitCast(quiet, b_.getFloatTy()), y);
  }

  Value* erf_f32(Value* x) {
    namespace fm = kernels::fmath;
    Value* bits = b_.CreateAnd(b_.CreateBitCast(x, b_.getInt32Ty()), b_.getInt32(0x7FFFFFFF));
    Value* a = b_.CreateBitCast(bits, b_.getFloatTy());
    Value* small = b_.CreateFMul(x, horner(fm::kErfSmallPoly, b_.CreateFMul(x, x)));
    Value* ac = b_.CreateSelect(b_.CreateFCmpOLT(a, f32(fm::kErfOne)), a, f32(fm::kErfOne));
    Value* large = b_.CreateFSub(f32(1.0f), exp_f32(horner(fm::kErfLargePoly, ac)));
    Value* negative = b_.CreateFCmpOLT(x, f32(0.0f));
    Value* signed_large = b_.CreateSelect(negative, b_.CreateFNeg(large), large);
    Value* one = b_.CreateSelect(negative, f32(-1.0f), f32(1.0f));
    Value* y =
        b_.CreateSelect(b_.CreateFCmpOLT(a, f32(fm::kErfSmall)), small,
                        b_.CreateSelect(b_.CreateFCmpOLT(a, f32(fm::kErfOne)), signed_large, one));
    return b_.CreateSelect(isnan(x), b_.CreateFAdd(x, x), y);
  }

  Value* tanh_f32(Value* x) {
    namespace fm = kernels::fmath;
    Value* bits = b_.CreateAnd(b_.CreateBitCast(x, b_.getInt32Ty()), b_.getInt32(0x7FFFFFFF));
    Value* a = b_.CreateBitCast(bits, b_.getFloatTy());
    Value* s = b_.CreateFMul(x, x);
    Value* small =
        b_.CreateFAdd(x, b_.CreateFMul(b_.CreateFMul(x, s), horner(fm::kTanhSmallPoly, s)));
    Value* e = exp_f32(b_.CreateFAdd(a, a));
    Value* large = b_.CreateFSub(f32(1.0f), b_.CreateFDiv(f32(2.0f), b_.CreateFAdd(e, f32(1.0f))));
    Value* signed_large =
        b_.CreateSelect(b_.CreateFCmpOLT(x, f32(0.0f)), b_.CreateFNeg(large), large);
    Value* y = b_.CreateSelect(b_.CreateFCmpOLT(a, f32(fm::kTanhSmall)), small, signed_large);
    y = b_.CreateSelect(b_.CreateFCmpOEQ(x, f32(0.0f)), x, y);
    return b_.CreateSelect(isnan(x), b_.CreateFAdd(x, x), y);
  }

  // exp / erf / tanh: fp32 through the shared definitions on both targets (so a fused kernel on
  // the GPU gives the CPU op's bits, as the row-wise kernels do); fp64 through the C library /
  // libdevice.
  Value* exp(Value* x) { return x->getType()->isFloatTy() ? exp_f32(x) : libm("exp", {x}); }
  Value* erf(Value* x) { return x->getType()->isFloatTy() ? erf_f32(x) : libm("erf", {x}); }
  Value* tanh(Value* x) { return x->getType()->isFloatTy() ? tanh_f32(x) : libm("tanh", {x}); }

  // Computed by the C library's function of that name (libdevice's on NVPTX).
  inline static const std::set<std::string> kLibmUnary = {"log",  "expm1", "log1p", "sin",  "cos",
                                                          "tan",  "asin",  "acos",  "atan", "sinh",
                                                          "cosh", "asinh", "acosh", "atanh"};

  Value* unary(const std::string& op, Value* x) {
    llvm::Type* t = x->getType();
    if (op == "neg") return b_.CreateFNeg(x);
    if (op == "abs") return intrinsic(llvm::Intrinsic::fabs, x);
    if (op == "sqrt") return intrinsic(llvm::Intrinsic::sqrt, x);
    // floor/ceil pass NaN through untouched (a signalling one stays signalling), as the CPU
    // op's inline expansion of std::floor / std::ceil does (GCC calls no library there).
    if (op == "floor") return b_.CreateSelect(isnan(x), x, intrinsic(llvm::Intrinsic::floor, x));
    if (op == "ceil") return b_.CreateSelect(isnan(x), x, intrinsic(llvm::Intrinsic::ceil, x));
    // round: half to even, as the CPU op's std::nearbyint in the default rounding mode; a NaN
    // comes back quiet, as from the C library's nearbyint (which that call is without SSE4.1).
    if (op == "round")
      return b_.CreateSelect(isnan(x), b_.CreateFAdd(x, x),
                             intrinsic(llvm::Intrinsic::roundeven, x));
    if (op == "exp") return exp(x);
    if (op == "erf") return erf(x);
    if (op == "tanh") return tanh(x);
    // Through the C library on the host (the CPU ops' std::log, std::expm1, ...: the same
    // calls) and libdevice on NVPTX, whose results may differ in the last bit.
    if (kLibmUnary.count(op)) return libm(op, {x});
    if (op == "reciprocal") return b_.CreateFDiv(fconst(t, 1.0), x);
    if (op == "sigmoid") {
      Value* e = exp(b_.CreateFNeg(x));
      return b_.CreateFDiv(fconst(t, 1.0), b_.CreateFAdd(fconst(t, 1.0), e));
    }
    if (op == "relu")
      return b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(t, 0.0)), fconst(t, 0.0), x);
    // sign: NaN kept, (0 < x) - (x < 0) otherwise (so -0 gives +0).
    Value* s =
        b_.CreateSelect(b_.CreateFCmpOLT(x, fconst(t, 0.0)), fconst(t, -1.0), fconst(t, 0.0));
    s = b_.CreateSelect(b_.CreateFCmpOGT(x, fconst(t, 0.0)), fconst(t, 1.0), s);
    return b_.CreateSelect(isnan(x), x, s);
  }

  Value* binary(const std::string& op, Value* a, Value* c) {
    if (op == "add") return b_.CreateFAdd(a, c);
    if (op == "sub") return b_.CreateFSub(a, c);
    if (op == "mul") return b_.CreateFMul(a, c);
    if (op == "div") return b_.CreateFDiv(a, c);
    // The CPU's variadic Max/Min: a NaN second operand wins, otherwise a < b ? b : a (so a
    // NaN first operand is kept too).
    if (op == "max") {
      return b_.CreateSelect(isnan(c), c, b_.CreateSelect(b_.CreateFCmpOLT(a, c), c, a));
    }
    // Clip's bounds, as the CPU op's std::max(x, lo) and std::min(x, hi): x unless the bound
    // lies strictly beyond it (a NaN x stays NaN, a NaN bound changes nothing).
    if (op == "clamp_min") return b_.CreateSelect(b_.CreateFCmpOLT(a, c), c, a);
    if (op == "clamp_max") return b_.CreateSelect(b_.CreateFCmpOLT(c, a), c, a);
    return b_.CreateSelect(isnan(c), c, b_.CreateSelect(b_.CreateFCmpOLT(c, a), c, a));
  }

  Value* compare(const std::string& op, Value* a, Value* c) {
    if (a->getType()->isIntegerTy(1)) return b_.CreateICmpEQ(a, c);  // equal on bool
    if (op == "equal") return b_.CreateFCmpOEQ(a, c);
    if (op == "less") return b_.CreateFCmpOLT(a, c);
    if (op == "less_equal") return b_.CreateFCmpOLE(a, c);
    if (op == "greater") return b_.CreateFCmpOGT(a, c);
    return b_.CreateFCmpOGE(a, c);
  }

  // Instruction i's stored value (i16 bits for the 16-bit floats, i1 for bool).
  Value* compute(int i) {
    const Instr& in = k_.body(i);
    const std::string& op = in.op();
    const int dt = in.dtype();
    auto arg = [&](int n) { return opmath(in.args(n)); };
    if (op == "const") {
      switch (dt) {
        case kBool:
          return b_.getInt1(in.value() != 0);
        case kF16:
          return b_.getInt16(float_to_half(static_cast<float>(in.value())).bits);
        case kBF16:
          return b_.getInt16(float_to_bf16(static_cast<float>(in.value())).bits);
        default:
          return fconst(memory_type(dt), in.value());
      }
    }
    if (op == "cast") {
      // convert<To, From>: the identity for equal types, store<To>(load(v)) otherwise.
      if (k_.body(in.args(0)).dtype() == dt) return stored_[in.args(0)];
      return round_to(arg(0), dt);
    }
    if (op == "not") return b_.CreateNot(arg(0));
    if (op == "and") return b_.CreateAnd(arg(0), arg(1));
    if (op == "or") return b_.CreateOr(arg(0), arg(1));
    if (op == "xor") return b_.CreateXor(arg(0), arg(1));
    if (op == "isnan") return isnan(arg(0));
    if (op == "isinf") {
      Value* x = arg(0);
      llvm::Type* t = x->getType();
      const bool pos = in.iattrs_size() > 0 ? in.iattrs(0) != 0 : true;
      const bool neg = in.iattrs_size() > 1 ? in.iattrs(1) != 0 : true;
      Value* inf =
          b_.CreateFCmpOEQ(intrinsic(llvm::Intrinsic::fabs, x), llvm::ConstantFP::getInfinity(t));
      Value* wanted =
          b_.CreateSelect(b_.CreateFCmpOGT(x, fconst(t, 0.0)), b_.getInt1(pos), b_.getInt1(neg));
      return b_.CreateAnd(inf, wanted);
    }
    if (kCompare.count(op)) return compare(op, arg(0), arg(1));
    if (op == "where") return round_to(b_.CreateSelect(arg(0), arg(1), arg(2)), dt);
    if (op == "pow") {
      Value* a = arg(0);
      return round_to(libm("pow", {a, to_float_type(arg(1), a->getType())}), dt);
    }
    if (kBinaryFloat.count(op)) return round_to(binary(op, arg(0), arg(1)), dt);
    return round_to(unary(op, arg(0)), dt);
  }

  llvm::IRBuilder<>& b_;
  llvm::Module& m_;
  const KernelDef& k_;
  Target target_;
  llvm::MDNode* group_ = nullptr;
  std::vector<Value*> stored_, opmath_;
  // The opmath (fp32) form of the value compute() just rounded to bf16, or null.
  Value* rounded_opmath_ = nullptr;
};

}  // namespace ampc::kernels::codegen
