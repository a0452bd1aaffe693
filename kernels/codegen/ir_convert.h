// The 16-bit float conversions of base/half.h and kernels/cpu/elementwise_types.h written as
// LLVM IR: integer operations and selects only (no branches, no fp16 hardware), so that the
// host and the GPU produce the same bits as the CPU ops, NaN payloads, infinities and
// subnormals included. Internal to kernels/codegen; only ir_builder.cc includes it.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

namespace ampc::kernels::codegen::convert {

using llvm::Value;

inline Value* u32(llvm::IRBuilder<>& b, uint32_t v) {
  return b.getInt32(v);
}

// half_to_float: the fields moved into fp32's; a subnormal is mantissa * 2^-24 (exact).
inline Value* half_to_float(llvm::IRBuilder<>& b, Value* h16) {
  Value* w = b.CreateZExt(h16, b.getInt32Ty());
  Value* sign = b.CreateShl(b.CreateAnd(w, u32(b, 0x8000u)), 16);
  Value* exp = b.CreateAnd(b.CreateLShr(w, 10), u32(b, 0x1fu));
  Value* mant = b.CreateAnd(w, u32(b, 0x3ffu));
  Value* mant_hi = b.CreateShl(mant, 13);
  Value* inf_nan = b.CreateOr(b.CreateOr(sign, u32(b, 0x7f800000u)), mant_hi);
  Value* normal =
      b.CreateOr(b.CreateOr(sign, b.CreateShl(b.CreateAdd(exp, u32(b, 112)), 23)), mant_hi);
  Value* sub_mag = b.CreateFMul(b.CreateUIToFP(mant, b.getFloatTy()),
                                llvm::ConstantFP::get(b.getFloatTy(), 5.9604644775390625e-08));
  Value* sub = b.CreateOr(b.CreateBitCast(sub_mag, b.getInt32Ty()), sign);
  Value* r = b.CreateSelect(b.CreateICmpEQ(exp, u32(b, 0)), sub, normal);
  r = b.CreateSelect(b.CreateICmpEQ(exp, u32(b, 0x1fu)), inf_nan, r);
  return b.CreateBitCast(r, b.getFloatTy());
}

// float_to_half: round to nearest even; overflow to inf; NaN quieted, top payload kept.
inline Value* float_to_half(llvm::IRBuilder<>& b, Value* f) {
  Value* u = b.CreateBitCast(f, b.getInt32Ty());
  Value* sign = b.CreateAnd(b.CreateLShr(u, 16), u32(b, 0x8000u));
  Value* abs = b.CreateAnd(u, u32(b, 0x7fffffffu));
  Value* payload = b.CreateOr(u32(b, 0x200u), b.CreateAnd(b.CreateLShr(abs, 13), u32(b, 0x3ffu)));
  Value* inf_nan =
      b.CreateOr(u32(b, 0x7c00u),
                 b.CreateSelect(b.CreateICmpUGT(abs, u32(b, 0x7f800000u)), payload, u32(b, 0)));
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  Value* odd = b.CreateAnd(b.CreateLShr(abs, 13), u32(b, 1));
  Value* rounded = b.CreateAdd(b.CreateAdd(abs, u32(b, 0xfffu)), odd);
  Value* normal = b.CreateLShr(b.CreateSub(rounded, u32(b, 0x38000000u)), 13);
  // Subnormal: the integer part of the scaled mantissa, rounded with integer arithmetic. The
  // shift is clamped to a valid amount where this arm is not selected.
  Value* is_sub = b.CreateAnd(b.CreateICmpUGE(abs, u32(b, 0x33000000u)),
                              b.CreateICmpULT(abs, u32(b, 0x38800000u)));
  Value* exp = b.CreateLShr(abs, 23);
  Value* shift = b.CreateSelect(is_sub, b.CreateSub(u32(b, 126), exp), u32(b, 14));
  Value* mant = b.CreateOr(b.CreateAnd(abs, u32(b, 0x7fffffu)), u32(b, 0x800000u));
  Value* kept = b.CreateLShr(mant, shift);
  Value* rem = b.CreateAnd(mant, b.CreateSub(b.CreateShl(u32(b, 1), shift), u32(b, 1)));
  Value* halfway = b.CreateShl(u32(b, 1), b.CreateSub(shift, u32(b, 1)));
  Value* up = b.CreateOr(b.CreateICmpUGT(rem, halfway),
                         b.CreateAnd(b.CreateICmpEQ(rem, halfway),
                                     b.CreateICmpNE(b.CreateAnd(kept, u32(b, 1)), u32(b, 0))));
  Value* sub = b.CreateAdd(kept, b.CreateZExt(up, b.getInt32Ty()));
  Value* r = b.CreateSelect(b.CreateICmpULT(abs, u32(b, 0x38800000u)), sub, normal);
  r = b.CreateSelect(b.CreateICmpULT(abs, u32(b, 0x33000000u)), u32(b, 0), r);
  r = b.CreateSelect(b.CreateICmpUGE(abs, u32(b, 0x477ff000u)), u32(b, 0x7c00u), r);
  r = b.CreateSelect(b.CreateICmpUGE(abs, u32(b, 0x7f800000u)), inf_nan, r);
  return b.CreateTrunc(b.CreateOr(r, sign), b.getInt16Ty());
}

inline Value* bf16_to_float(llvm::IRBuilder<>& b, Value* h16) {
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(h16, b.getInt32Ty()), 16), b.getFloatTy());
}

// bf16_rounded_bits: f rounded to nearest even at bf16's precision, as fp32 bits whose low
// half is zero; NaN quieted (bit 22 set, the kept half's bit 6). Kept in 32-bit lanes so that
// a value both stored and used again needs no narrowing and widening between the two (in a
// bf16 plan's fused kernels that round trip cost more than the arithmetic).
inline Value* bf16_rounded_bits(llvm::IRBuilder<>& b, Value* f) {
  Value* u = b.CreateBitCast(f, b.getInt32Ty());
  Value* is_nan = b.CreateFCmpUNO(f, f);
  Value* odd = b.CreateAnd(b.CreateLShr(u, 16), u32(b, 1));
  Value* rounded = b.CreateAdd(b.CreateAdd(u, u32(b, 0x7fffu)), odd);
  Value* nan = b.CreateOr(u, u32(b, 0x00400000u));
  return b.CreateAnd(b.CreateSelect(is_nan, nan, rounded), u32(b, 0xffff0000u));
}

// float_to_bf16: round to nearest even; NaN quieted (bit 6 of the kept half set).
inline Value* float_to_bf16(llvm::IRBuilder<>& b, Value* f) {
  return b.CreateTrunc(b.CreateLShr(bf16_rounded_bits(b, f), 16), b.getInt16Ty());
}

// double_to_float_odd: RNE to fp32, then one step towards d when that was inexact and left
// the last mantissa bit even (round to odd), so a later RNE to 16 bits rounds only once.
inline Value* double_to_float_odd(llvm::IRBuilder<>& b, Value* d) {
  llvm::Type* f64 = b.getDoubleTy();
  Value* f = b.CreateFPTrunc(d, b.getFloatTy());
  Value* back = b.CreateFPExt(f, f64);
  Value* abs_d = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d);
  Value* finite = b.CreateFCmpOLT(abs_d, llvm::ConstantFP::getInfinity(f64));
  Value* inexact = b.CreateFCmpUNE(back, d);
  Value* bits = b.CreateBitCast(f, b.getInt32Ty());
  Value* even = b.CreateICmpEQ(b.CreateAnd(bits, u32(b, 1)), u32(b, 0));
  // The sign is in bit 31, so +-1 on the bits moves the magnitude (nextafter towards d).
  Value* away = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back), abs_d);
  Value* stepped = b.CreateSelect(away, b.CreateSub(bits, u32(b, 1)), b.CreateAdd(bits, u32(b, 1)));
  Value* adjust = b.CreateAnd(b.CreateAnd(finite, inexact), even);
  return b.CreateBitCast(b.CreateSelect(adjust, stepped, bits), b.getFloatTy());
}

}  // namespace ampc::kernels::codegen::convert
