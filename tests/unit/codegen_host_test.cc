// The host back end of kernels/codegen against the CPU ops, bit for bit: every instruction on
// every dtype (random values plus zeros, subnormals, infinities, NaN payloads, values near
// fp16's maximum and rounding ties), a fused chain against the sequence of CPU ops, broadcast
// strides, flat kernels over sub-ranges, the guard, errors, structure keys and compile time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include "base/error.h"
#include "base/half.h"
#include "kernels/codegen/codegen.h"
#include "tests/unit/codegen_test_kernels.h"
#include "tests/unit/op_test_helpers.h"

namespace ampc::kernels::codegen {
namespace {

using namespace cgtest;  // NOLINT: the kernel builders
using rt::Tensor;
using ::testing::HasSubstr;
using ::testing::Not;
namespace optest = rt::cpu::optest;

constexpr int64_t kOpset = 17;

DType dt(int code) {
  return static_cast<DType>(code);
}

// Values every float test sees, besides random ones.
const std::vector<double> kSpecials = {0.0,
                                       -0.0,
                                       1.0,
                                       -1.0,
                                       0.5,
                                       -2.5,
                                       0.1,
                                       3.0,
                                       65504.0,
                                       -65504.0,
                                       65519.99,
                                       65520.0,
                                       1e5,
                                       6e-8,
                                       -3e-8,
                                       5.9604644775390625e-08,
                                       1e-40,
                                       -1e-45,
                                       1e-310,
                                       std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN(),
                                       1.00048828125,            // 1 + 2^-11: an f16 tie
                                       1.00048828125 + 0x1p-40,  // double rounding trap (f64)
                                       1.0039062500000002,
                                       2049.0,
                                       3.4e38,
                                       -1e300,
                                       88.0,
                                       -104.0,
                                       20.0,
                                       1e-7};

// Raw NaN payloads and signalling NaNs of each width.
const std::vector<uint16_t> kNan16 = {0x7c01, 0xfe00, 0x7dff, 0xffff, 0x7f81, 0xff81};
const std::vector<uint32_t> kNan32 = {0x7f800001u, 0xffc00001u, 0x7fc12345u};
const std::vector<uint64_t> kNan64 = {0x7ff0000000000001ull, 0xfff8000000000123ull};

template <typename T>
void put(Tensor& t, int64_t i, T bits) {
  std::memcpy(static_cast<char*>(t.raw()) + i * sizeof(T), &bits, sizeof(T));
}

// n elements of `dtype`: a third random bit patterns, a third uniform in [-8, 8], and the
// specials spread through.
Tensor random_tensor(int dtype, const std::vector<int64_t>& shape, uint32_t seed) {
  Tensor t(dt(dtype), shape);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> uniform(-8.0, 8.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const uint64_t r = gen();
    const int kind = static_cast<int>(r % 6);
    const uint64_t bits = gen();
    double v = uniform(gen);
    if (kind == 0) v = kSpecials[(r >> 8) % kSpecials.size()];
    switch (dtype) {
      case kBool:
        put<uint8_t>(t, i, static_cast<uint8_t>(r >> 20 & 1));
        break;
      case kF16:
      case kBF16: {
        uint16_t h = dtype == kF16 ? float_to_half(static_cast<float>(v)).bits
                                   : float_to_bf16(static_cast<float>(v)).bits;
        if (kind == 1 || kind == 2) h = static_cast<uint16_t>(bits);
        if (kind == 3 && (r >> 8) % 8 == 0) h = kNan16[(r >> 12) % kNan16.size()];
        put<uint16_t>(t, i, h);
        break;
      }
      case kF32: {
        uint32_t u = float_bits(static_cast<float>(v));
        if (kind == 1) u = static_cast<uint32_t>(bits);
        if (kind == 3 && (r >> 8) % 8 == 0) u = kNan32[(r >> 12) % kNan32.size()];
        put<uint32_t>(t, i, u);
        break;
      }
      default: {
        uint64_t u;
        std::memcpy(&u, &v, 8);
        if (kind == 1) u = bits;
        if (kind == 3 && (r >> 8) % 8 == 0) u = kNan64[(r >> 12) % kNan64.size()];
        put<uint64_t>(t, i, u);
      }
    }
  }
  return t;
}

Tensor scalar_tensor(int dtype, double v) {
  Tensor t(dt(dtype), {});
  switch (dtype) {
    case kBool:
      put<uint8_t>(t, 0, v != 0);
      break;
    case kF16:
      put<uint16_t>(t, 0, float_to_half(static_cast<float>(v)).bits);
      break;
    case kBF16:
      put<uint16_t>(t, 0, float_to_bf16(static_cast<float>(v)).bits);
      break;
    case kF32:
      put<float>(t, 0, static_cast<float>(v));
      break;
    default:
      put<double>(t, 0, v);
  }
  return t;
}

// expm1 and log1p, which no ONNX op is: the C library's function on the value widened by the
// CPU's Cast (fp32 for the 16-bit types, as the activations built on them compute), rounded
// back once by the CPU's Cast.
Tensor libm_reference(const std::string& op, const Tensor& x, int dtype) {
  const int opmath = dtype == kF64 ? kF64 : kF32;
  Tensor w = optest::run("Cast", {x}, {optest::attr_i("to", opmath)}, 1, kOpset)[0];
  for (int64_t i = 0; i < w.numel(); ++i) {
    if (opmath == kF64) {
      double& v = w.data<double>()[i];
      v = op == "expm1" ? std::expm1(v) : std::log1p(v);
    } else {
      float& v = w.data<float>()[i];
      v = op == "expm1" ? std::expm1(v) : std::log1p(v);
    }
  }
  return optest::run("Cast", {w}, {optest::attr_i("to", dtype)}, 1, kOpset)[0];
}

// The kernel evaluated instruction by instruction through the CPU ops of the runtime's
// registry, on inputs whose shapes broadcast to the iteration space.
std::vector<Tensor> cpu_reference(const KernelDef& k, const std::vector<Tensor>& inputs) {
  static const std::map<std::string, std::string> kOnnx = {{"add", "Add"},
                                                           {"sub", "Sub"},
                                                           {"mul", "Mul"},
                                                           {"div", "Div"},
                                                           {"max", "Max"},
                                                           {"min", "Min"},
                                                           {"pow", "Pow"},
                                                           {"neg", "Neg"},
                                                           {"abs", "Abs"},
                                                           {"sqrt", "Sqrt"},
                                                           {"exp", "Exp"},
                                                           {"log", "Log"},
                                                           {"reciprocal", "Reciprocal"},
                                                           {"tanh", "Tanh"},
                                                           {"sin", "Sin"},
                                                           {"cos", "Cos"},
                                                           {"tan", "Tan"},
                                                           {"asin", "Asin"},
                                                           {"acos", "Acos"},
                                                           {"atan", "Atan"},
                                                           {"sinh", "Sinh"},
                                                           {"cosh", "Cosh"},
                                                           {"asinh", "Asinh"},
                                                           {"acosh", "Acosh"},
                                                           {"atanh", "Atanh"},
                                                           {"erf", "Erf"},
                                                           {"sigmoid", "Sigmoid"},
                                                           {"relu", "Relu"},
                                                           {"floor", "Floor"},
                                                           {"ceil", "Ceil"},
                                                           {"round", "Round"},
                                                           {"sign", "Sign"},
                                                           {"equal", "Equal"},
                                                           {"less", "Less"},
                                                           {"less_equal", "LessOrEqual"},
                                                           {"greater", "Greater"},
                                                           {"greater_equal", "GreaterOrEqual"},
                                                           {"not", "Not"},
                                                           {"and", "And"},
                                                           {"or", "Or"},
                                                           {"xor", "Xor"},
                                                           {"where", "Where"},
                                                           {"isnan", "IsNaN"},
                                                           {"isinf", "IsInf"},
                                                           {"cast", "Cast"}};
  std::vector<Tensor> values;
  for (const Instr& in : k.body()) {
    if (in.op() == "load") {
      values.push_back(inputs[in.operand()]);
    } else if (in.op() == "const") {
      values.push_back(scalar_tensor(in.dtype(), in.value()));
    } else {
      std::vector<Tensor> args;
      for (int a : in.args()) args.push_back(values[a]);
      std::vector<plan::Attribute> attrs;
      if (in.op() == "clamp_min" || in.op() == "clamp_max") {
        // Clip(x, lo) and Clip(x, -inf, hi): the CPU op's std::max(x, lo), std::min(x, hi).
        if (in.op() == "clamp_max")
          args.insert(args.begin() + 1,
                      scalar_tensor(in.dtype(), -std::numeric_limits<double>::infinity()));
        values.push_back(optest::run("Clip", args, attrs, 1, kOpset)[0]);
        continue;
      }
      if (in.op() == "expm1" || in.op() == "log1p") {
        values.push_back(libm_reference(in.op(), args[0], in.dtype()));
        continue;
      }
      if (in.op() == "cast") attrs.push_back(optest::attr_i("to", in.dtype()));
      if (in.op() == "isinf") {
        attrs.push_back(optest::attr_i("detect_positive", in.iattrs(0)));
        attrs.push_back(optest::attr_i("detect_negative", in.iattrs(1)));
      }
      values.push_back(optest::run(kOnnx.at(in.op()), args, attrs, 1, kOpset)[0]);
    }
  }
  std::vector<Tensor> outs;
  for (int o : k.outputs()) outs.push_back(values[o]);
  return outs;
}

size_t elem_size(int dtype) {
  return dtype == kBool ? 1 : dtype == kF64 ? 8 : dtype == kF32 ? 4 : 2;
}

std::string hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (size_t b = n; b-- > 0;) {
    const auto byte = static_cast<const unsigned char*>(p)[b];
    s += digits[byte >> 4];
    s += digits[byte & 15];
  }
  return s;
}

// Runs the compiled kernel over [begin, end) of `n` elements; outputs start as 0xAB bytes.
std::vector<std::vector<unsigned char>> run_jit(HostKernelFn fn, const KernelDef& k,
                                                std::vector<Tensor>& inputs, int64_t n,
                                                int64_t begin, int64_t end) {
  std::vector<std::vector<unsigned char>> outs;
  for (int o : k.outputs()) {
    outs.emplace_back(static_cast<size_t>(n) * elem_size(k.body(o).dtype()), 0xAB);
  }
  std::vector<void*> ops;
  for (auto& t : inputs) ops.push_back(t.raw());
  for (auto& o : outs) ops.push_back(o.data());
  fn(ops.data(), begin, end);
  return outs;
}

bool nan_bits(const void* p, size_t es) {
  uint64_t u = 0;
  std::memcpy(&u, p, es);
  switch (es) {
    case 2:  // f16 or bf16: exponent all ones and a mantissa, in either layout
      return (u & 0x7c00) == 0x7c00 && (u & 0x3ff) != 0 ? true
                                                        : (u & 0x7f80) == 0x7f80 && (u & 0x7f);
    case 4:
      return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu);
    case 8:
      return (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (u & 0xfffffffffffffull);
    default:
      return false;
  }
}

// Two or more inputs NaN at element i (a scalar input counts everywhere): which payload an
// instruction with two NaN operands keeps is the compiler's choice of operand order (x86
// keeps the first source's), for the CPU ops compiled by GCC as for the JIT, and GCC's
// choice changes with the optimisation level (the -O1 sanitizer build keeps the other one).
// Any NaN is accepted then; a single NaN's payload must still come through as the CPU's.
bool two_nan_inputs(const std::vector<Tensor>& inputs, int64_t i) {
  int nans = 0;
  for (const Tensor& t : inputs) {
    const size_t es = t.nbytes() / static_cast<size_t>(t.numel());
    const int64_t at = t.numel() == 1 ? 0 : i;
    nans += nan_bits(static_cast<const char*>(t.raw()) + at * es, es);
  }
  return nans >= 2;
}

// Output `o` of the JIT equals the CPU reference bit for bit on [begin, end); `inputs`, when
// given (full inputs), are shown at the first difference.
void expect_bits(const KernelDef& k, const std::vector<unsigned char>& got, const Tensor& want,
                 int o, int64_t begin, int64_t end, const std::vector<Tensor>* inputs = nullptr) {
  const size_t es = elem_size(k.body(k.outputs(o)).dtype());
  ASSERT_EQ(want.nbytes(), got.size()) << k.name();
  const auto* w = static_cast<const unsigned char*>(want.raw());
  for (int64_t i = begin; i < end; ++i) {
    if (std::memcmp(got.data() + i * es, w + i * es, es) != 0) {
      if (inputs && two_nan_inputs(*inputs, i) && nan_bits(got.data() + i * es, es) &&
          nan_bits(w + i * es, es))
        continue;
      std::string in;
      for (size_t j = 0; inputs && j < inputs->size(); ++j) {
        const Tensor& t = (*inputs)[j];
        const size_t ies = t.nbytes() / static_cast<size_t>(t.numel());
        const int64_t at = t.numel() == 1 ? 0 : i;
        in += " " + hex(static_cast<const char*>(t.raw()) + at * ies, ies);
      }
      ADD_FAILURE() << k.name() << " output " << o << " element " << i << ": jit "
                    << hex(got.data() + i * es, es) << ", cpu " << hex(w + i * es, es)
                    << (inputs ? ", inputs" + in : "");
      return;
    }
  }
}

// Each kernel (flat, full inputs) on random inputs of n elements, against the CPU ops.
void check_against_cpu(const std::vector<KernelDef>& kernels, int64_t n) {
  std::vector<const KernelDef*> ptrs;
  for (const auto& k : kernels) ptrs.push_back(&k);
  HostKernels jit(ptrs);
  uint32_t seed = 1;
  for (const auto& k : kernels) {
    std::vector<Tensor> inputs;
    for (const Operand& op : k.inputs()) {
      const std::vector<int64_t> shape =
          op.scalar() ? std::vector<int64_t>{} : std::vector<int64_t>{n};
      inputs.push_back(random_tensor(op.dtype(), shape, seed++));
    }
    const auto want = cpu_reference(k, inputs);
    HostKernelFn fn = jit.find(k.name());
    ASSERT_NE(fn, nullptr) << k.name();
    const auto got = run_jit(fn, k, inputs, n, 0, n);
    for (int o = 0; o < k.outputs_size(); ++o) expect_bits(k, got[o], want[o], o, 0, n, &inputs);
  }
}

std::vector<KernelDef> select(const std::function<bool(const KernelDef&)>& pred) {
  std::vector<KernelDef> out;
  for (auto& k : coverage_kernels()) {
    if (pred(k)) out.push_back(k);
  }
  return out;
}

const std::string& op_of(const KernelDef& k) {
  return k.body(k.body_size() - 1).op();
}

TEST(CodegenHost, UnaryOpsMatchCpuBitForBit) {
  check_against_cpu(select([](const KernelDef& k) {
                      return std::find(kUnaryOps.begin(), kUnaryOps.end(), op_of(k)) !=
                             kUnaryOps.end();
                    }),
                    4099);
}

TEST(CodegenHost, BinaryOpsMatchCpuBitForBit) {
  check_against_cpu(select([](const KernelDef& k) {
                      return std::find(kBinaryOps.begin(), kBinaryOps.end(), op_of(k)) !=
                             kBinaryOps.end();
                    }),
                    4099);
}

// Clip's bounds (the fused form of Clip: clamp_min, then clamp_max) against the CPU Clip op on
// x with every special, for bounds that are ordinary, zeros of either sign, infinite and NaN
// (the CPU op ignores a NaN bound; a NaN x stays NaN), in every float type.
TEST(CodegenHost, ClipBoundsMatchCpuBitForBit) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> bounds = {
      -1.5, 0.0, -0.0, 6.0, inf, -inf, std::numeric_limits<double>::quiet_NaN()};
  std::vector<KernelDef> kernels;
  for (int t : kFloatTypes) {
    for (const char* op : {"clamp_min", "clamp_max"}) kernels.push_back(clamp_kernel(op, t));
  }
  std::vector<const KernelDef*> ptrs;
  for (const auto& k : kernels) ptrs.push_back(&k);
  HostKernels jit(ptrs);
  constexpr int64_t n = 4099;
  uint32_t seed = 7;
  for (const auto& k : kernels) {
    for (double b : bounds) {
      std::vector<Tensor> inputs = {random_tensor(k.inputs(0).dtype(), {n}, seed++),
                                    scalar_tensor(k.inputs(1).dtype(), b)};
      const auto want = cpu_reference(k, inputs);
      const auto got = run_jit(jit.find(k.name()), k, inputs, n, 0, n);
      expect_bits(k, got[0], want[0], 0, 0, n, &inputs);
    }
  }
}

TEST(CodegenHost, ComparisonsAndLogicMatchCpu) {
  check_against_cpu(select([](const KernelDef& k) {
                      const auto& op = op_of(k);
                      return std::find(kCompareOps.begin(), kCompareOps.end(), op) !=
                                 kCompareOps.end() ||
                             op == "and" || op == "or" || op == "xor" || op == "not" ||
                             op == "where" || op == "isnan" || op == "isinf";
                    }),
                    2053);
}

TEST(CodegenHost, CastsBetweenAllTypesMatchCpu) {
  check_against_cpu(select([](const KernelDef& k) { return op_of(k) == "cast"; }), 4099);
}

TEST(CodegenHost, ConstantsAndMixedExponentPow) {
  KernelBuilder b("consts");
  const int x = b.input(kF16);
  const int c = b.constant(kF16, 0.333251953125);  // exactly representable in f16
  const int e = b.constant(kF64, 1.5);
  b.output(b.op("mul", kF16, {x, c}));
  b.output(b.op("pow", kF16, {x, e}));
  b.output(b.op("add", kF64, {e, b.op("cast", kF64, {x})}));
  check_against_cpu({b.def()}, 517);
}

// cast f16 -> f32, mul, add, tanh, cast back: the same bits as the five CPU ops in sequence,
// with two outputs (the f32 intermediate and the f16 result).
TEST(CodegenHost, FusedChainEqualsCpuSequence) {
  KernelBuilder b("chain");
  const int x = b.input(kF16), w = b.input(kF32), bias = b.input(kF32, true);
  const int xf = b.op("cast", kF32, {x});
  const int m = b.op("mul", kF32, {xf, w});
  const int a = b.op("add", kF32, {m, bias});
  const int t = b.op("tanh", kF32, {a});
  b.output(b.op("cast", kF16, {t})).output(a);
  const KernelDef& k = b.def();
  const int64_t n = 3001;
  std::vector<Tensor> inputs = {random_tensor(kF16, {n}, 7), random_tensor(kF32, {n}, 8),
                                scalar_tensor(kF32, 0.125)};
  const auto want = cpu_reference(k, inputs);
  HostKernels jit({&k});
  const auto got = run_jit(jit.find("chain"), k, inputs, n, 0, n);
  expect_bits(k, got[0], want[0], 0, 0, n, &inputs);
  expect_bits(k, got[1], want[1], 1, 0, n, &inputs);
}

// GELU (erf form) in bf16 through f32, as a fused activation.
TEST(CodegenHost, FusedGeluEqualsCpuSequence) {
  KernelBuilder b("gelu");
  const int xf = b.op("cast", kF32, {b.input(kBF16)});
  const int half = b.op("mul", kF32, {xf, b.constant(kF32, 0.5)});
  const int e = b.op("erf", kF32, {b.op("mul", kF32, {xf, b.constant(kF32, 0.70710677f)})});
  b.output(b.op("cast", kBF16,
                {b.op("mul", kF32, {half, b.op("add", kF32, {b.constant(kF32, 1), e})})}));
  const KernelDef& k = b.def();
  const int64_t n = 2500;
  std::vector<Tensor> inputs = {random_tensor(kBF16, {n}, 11)};
  const auto want = cpu_reference(k, inputs);
  HostKernels jit({&k});
  expect_bits(k, run_jit(jit.find("gelu"), k, inputs, n, 0, n)[0], want[0], 0, 0, n);
}

// An Adam-like optimizer step: f16 gradient, f32 state updated in place (outputs alias the
// inputs), skipped by the guard; equal to the CPU ops in sequence.
TEST(CodegenHost, InPlaceGuardedOptimizerStep) {
  KernelBuilder b("adam");
  const int p = b.input(kF32), g = b.input(kF16), m = b.input(kF32), v = b.input(kF32);
  const int lr = b.input(kF32, true);
  b.input(kBool, true);
  const int gf = b.op("cast", kF32, {g});
  auto c = [&](float x) { return b.constant(kF32, x); };
  const int m2 =
      b.op("add", kF32, {b.op("mul", kF32, {m, c(0.9f)}), b.op("mul", kF32, {gf, c(0.1f)})});
  const int v2 = b.op("add", kF32,
                      {b.op("mul", kF32, {v, c(0.999f)}),
                       b.op("mul", kF32, {b.op("mul", kF32, {gf, gf}), c(0.001f)})});
  const int step =
      b.op("div", kF32,
           {b.op("mul", kF32, {lr, m2}), b.op("add", kF32, {b.op("sqrt", kF32, {v2}), c(1e-8f)})});
  b.output(b.op("sub", kF32, {p, step})).output(m2).output(v2).guard(5);
  const KernelDef& k = b.def();
  const int64_t n = 1999;
  HostKernels jit({&k});
  for (bool skip : {false, true}) {
    std::vector<Tensor> in = {random_tensor(kF32, {n}, 21), random_tensor(kF16, {n}, 22),
                              random_tensor(kF32, {n}, 23), random_tensor(kF32, {n}, 24),
                              scalar_tensor(kF32, 1e-3),    scalar_tensor(kBool, skip)};
    const std::vector<Tensor> before = in;
    const auto want = cpu_reference(k, in);
    void* ops[] = {in[0].raw(), in[1].raw(), in[2].raw(), in[3].raw(), in[4].raw(),
                   in[5].raw(), in[0].raw(), in[2].raw(), in[3].raw()};
    jit.find("adam")(ops, 0, n);
    for (int o = 0; o < 3; ++o) {
      const Tensor& got = in[o == 0 ? 0 : o + 1];
      const Tensor& expected = skip ? before[o == 0 ? 0 : o + 1] : want[o];
      const auto* bytes = static_cast<const unsigned char*>(got.raw());
      expect_bits(k, std::vector<unsigned char>(bytes, bytes + got.nbytes()), expected, o, 0, n,
                  &before);
    }
  }
}

// Broadcast operands through strides: a bias over rows, a column, a scalar; 3-D with a
// middle broadcast; sub-ranges that start and end inside rows.
TEST(CodegenHost, BroadcastStridesAndSubRanges) {
  const int64_t r = 37, c = 19;
  KernelBuilder b("bias_rows", {r, c});
  const int x = b.input(kBF16), bias = b.input(kBF16, false, {0, 1});
  const int col = b.input(kF32, false, {1, 0}), s = b.input(kBF16, true);
  const int y = b.op("add", kBF16, {b.op("mul", kBF16, {x, s}), bias});
  const int z = b.op("sub", kF32, {b.op("cast", kF32, {y}), col});
  b.output(y).output(b.op("sigmoid", kF32, {z}));
  const KernelDef& k2 = b.def();

  KernelBuilder b3("middle", {4, 5, 6});
  const int p = b3.input(kF16), q = b3.input(kF16, false, {6, 0, 1});
  b3.output(b3.op("max", kF16, {p, q}));
  const KernelDef& k3 = b3.def();

  HostKernels jit({&k2, &k3});
  std::vector<Tensor> in2 = {random_tensor(kBF16, {r, c}, 1), random_tensor(kBF16, {c}, 2),
                             random_tensor(kF32, {r, 1}, 3), scalar_tensor(kBF16, -1.5)};
  const auto want2 = cpu_reference(k2, in2);
  for (auto [begin, end] :
       {std::pair<int64_t, int64_t>{0, r * c}, {5, 17}, {20, 400}, {c, 2 * c}}) {
    const auto got = run_jit(jit.find("bias_rows"), k2, in2, r * c, begin, end);
    for (int o = 0; o < 2; ++o) {
      expect_bits(k2, got[o], want2[o], o, begin, end);
      for (int64_t i = 0; i < r * c; ++i) {
        if (i >= begin && i < end) continue;
        ASSERT_EQ(got[o][i * (o == 0 ? 2 : 4)], 0xAB) << "wrote outside the range at " << i;
      }
    }
  }
  std::vector<Tensor> in3 = {random_tensor(kF16, {4, 5, 6}, 4), random_tensor(kF16, {4, 1, 6}, 5)};
  const auto want3 = cpu_reference(k3, in3);
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 120}, {7, 93}}) {
    const auto got = run_jit(jit.find("middle"), k3, in3, 120, begin, end);
    expect_bits(k3, got[0], want3[0], 0, begin, end);
  }
}

// Rows shorter than a vector (a per-channel operand over 2x2 maps, as a BatchNorm gradient on
// MobileNet's last blocks) run one loop with the offsets computed per element; longer rows the
// row loop. Both against the CPU ops, over sub-ranges that cut rows.
TEST(CodegenHost, PerChannelOperandOverShortAndLongRows) {
  for (int64_t inner : {1, 4, 15, 16, 40}) {
    SCOPED_TRACE("rows of " + std::to_string(inner));
    const int64_t n = 6, c = 11, total = n * c * inner;
    KernelBuilder b("per_channel", {n, c, inner});
    const int x = b.input(kBF16), w = b.input(kF32, false, {0, 1, 0});
    const int lo = b.input(kBF16, true);
    const int keep = b.op("greater", kBool, {x, lo});
    const int y = b.op("mul", kF32, {b.op("cast", kF32, {x}), w});
    b.output(b.op("where", kF32, {keep, y, b.constant(kF32, 0)}));
    const KernelDef& k = b.def();
    HostKernels jit({&k});
    std::vector<Tensor> in = {random_tensor(kBF16, {n, c, inner}, 7),
                              random_tensor(kF32, {1, c, 1}, 8), scalar_tensor(kBF16, -0.25)};
    const auto want = cpu_reference(k, in);
    for (auto [begin, end] :
         {std::pair<int64_t, int64_t>{0, total}, {3, total - 5}, {inner + 1, 3 * inner + 2}}) {
      const auto got = run_jit(jit.find("per_channel"), k, in, total, begin, end);
      expect_bits(k, got[0], want[0], 0, begin, end);
    }
  }
}

// A flat kernel serves any size; callers split the range.
TEST(CodegenHost, FlatKernelOverSubRanges) {
  KernelBuilder b("flat");
  const int x = b.input(kF16), s = b.input(kF32, true);
  b.output(b.op("cast", kF16, {b.op("div", kF32, {b.op("cast", kF32, {x}), s})}));
  const KernelDef& k = b.def();
  HostKernels jit({&k});
  for (int64_t n : {1, 7, 1000, 65537}) {
    std::vector<Tensor> in = {random_tensor(kF16, {n}, static_cast<uint32_t>(n)),
                              scalar_tensor(kF32, 3.0)};
    const auto want = cpu_reference(k, in);
    std::vector<unsigned char> got(static_cast<size_t>(n) * 2, 0xAB);
    void* ops[] = {in[0].raw(), in[1].raw(), got.data()};
    const int64_t cut1 = n / 3, cut2 = n / 3 + n / 4;
    jit.find("flat")(ops, 0, cut1);
    jit.find("flat")(ops, cut2, n);
    expect_bits(k, got, want[0], 0, 0, cut1);
    expect_bits(k, got, want[0], 0, cut2, n);
    for (int64_t i = cut1; i < cut2; ++i) ASSERT_EQ(got[2 * i], 0xAB);
    jit.find("flat")(ops, cut1, cut2);
    expect_bits(k, got, want[0], 0, 0, n);
  }
}

// The CPU's flags as the kernel reports them (/proc/cpuinfo), the oracle of host detection.
std::string cpuinfo_flags() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "";
  char line[8192];
  std::string flags;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "flags", 5) == 0) {
      flags = std::string(line) + " ";
      break;
    }
  }
  std::fclose(f);
  return flags;
}

// Host code targets the CPU it runs on: its features as the kernel lists them, and with
// AVX-512 the loops of a streaming kernel use 512-bit registers.
TEST(CodegenHost, CompiledForTheHostCpu) {
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo";
  const HostTarget& host = host_target();
  EXPECT_FALSE(host.cpu.empty());
  const bool avx512 = flags.find(" avx512f ") != std::string::npos;
  EXPECT_EQ(host.has("avx512f"), avx512);
  EXPECT_EQ(host.has("avx2"), flags.find(" avx2 ") != std::string::npos);
  EXPECT_EQ(host.has("avx512bf16"), flags.find(" avx512_bf16 ") != std::string::npos);
  KernelBuilder b("axpy");
  const int x = b.input(kF32), y = b.input(kF32), a = b.input(kF32, true);
  b.output(b.op("add", kF32, {b.op("mul", kF32, {a, x}), y}));
  const std::string assembly = host_assembly(b.def());
  if (avx512) {
    EXPECT_THAT(assembly, HasSubstr("zmm"));
  } else if (host.has("avx2")) {
    EXPECT_THAT(assembly, HasSubstr("ymm"));
  }
  std::cout << "host CPU " << host.cpu << ", " << host.features.size() << " features"
            << (avx512 ? ", AVX-512" : "") << (host.has("avx512bf16") ? ", AVX512-BF16" : "")
            << "\n";
}

// Guard true: nothing written; false: computed.
TEST(CodegenHost, GuardSkipsTheKernel) {
  KernelBuilder b("guarded");
  const int x = b.input(kF32);
  b.input(kBool, true);
  b.output(b.op("mul", kF32, {x, b.constant(kF32, 2.0)})).guard(1);
  const KernelDef& k = b.def();
  HostKernels jit({&k});
  for (bool skip : {true, false}) {
    std::vector<Tensor> in = {random_tensor(kF32, {100}, 9), scalar_tensor(kBool, skip)};
    const auto got = run_jit(jit.find("guarded"), k, in, 100, 0, 100);
    if (skip) {
      EXPECT_EQ(got[0], std::vector<unsigned char>(400, 0xAB));
    } else {
      std::vector<Tensor> ref_in = {in[0]};
      KernelBuilder r("ref");
      r.output(r.op("mul", kF32, {r.input(kF32), r.constant(kF32, 2.0)}));
      expect_bits(k, got[0], cpu_reference(r.def(), ref_in)[0], 0, 0, 100);
    }
  }
}

// In place: the output is the input's buffer (an optimizer update); each element is read
// before it is written.
TEST(CodegenHost, OutputMayAliasItsInput) {
  KernelBuilder b("inplace");
  const int x = b.input(kF32), g = b.input(kF32);
  b.output(b.op("sub", kF32, {x, b.op("mul", kF32, {g, b.constant(kF32, 0.01)})}));
  const KernelDef& k = b.def();
  HostKernels jit({&k});
  std::vector<Tensor> in = {random_tensor(kF32, {1031}, 3), random_tensor(kF32, {1031}, 4)};
  const auto want = cpu_reference(k, in);
  void* ops[] = {in[0].raw(), in[1].raw(), in[0].raw()};
  jit.find("inplace")(ops, 0, 1031);
  EXPECT_EQ(std::memcmp(in[0].raw(), want[0].raw(), want[0].nbytes()), 0);
}

// Plans may be loaded on several threads at once, and their kernels run on many.
TEST(CodegenHost, ConcurrentCompilationAndCalls) {
  const KernelDef k = unary_kernel("sigmoid", kF16);
  std::vector<Tensor> in = {random_tensor(kF16, {4096}, 5)};
  const auto want = cpu_reference(k, in);
  std::vector<std::thread> threads;
  std::vector<std::vector<unsigned char>> got(4, std::vector<unsigned char>(8192, 0xAB));
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HostKernels jit({&k});
      std::vector<std::thread> callers;
      for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&, c] {
          void* ops[] = {in[0].raw(), got[t].data()};
          jit.find(k.name())(ops, c * 1024, (c + 1) * 1024);
        });
      }
      for (auto& c : callers) c.join();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) expect_bits(k, g, want[0], 0, 0, 4096);
}

TEST(CodegenHost, UnsupportedInstructionOrDtypeThrows) {
  KernelBuilder b("bad");
  b.output(b.op("cbrt", kF32, {b.input(kF32)}));
  const KernelDef& k = b.def();
  try {
    HostKernels jit({&k});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'cbrt'"));
  }
  KernelBuilder i("int");
  i.output(i.op("neg", 7, {i.input(7)}));
  const KernelDef& ik = i.def();
  EXPECT_THROW(HostKernels({&ik}), Error);
  KernelBuilder m("mixed");
  m.output(m.op("add", kF32, {m.input(kF32), m.input(kF16)}));
  const KernelDef& mk = m.def();
  EXPECT_THROW(HostKernels({&mk}), Error);
  HostKernels none(std::vector<const KernelDef*>{});
  EXPECT_EQ(none.find("x"), nullptr);
}

TEST(CodegenHost, StructureKeyIgnoresNameAndCode) {
  KernelDef a = unary_kernel("exp", kF16), b2 = a, c = unary_kernel("log", kF16);
  b2.set_name("other");
  b2.add_code()->set_ptx("...");
  EXPECT_EQ(structure_key(a), structure_key(b2));
  EXPECT_NE(structure_key(a), structure_key(c));
}

TEST(CodegenHost, IrTextIsOptimisedAndVectorised) {
  const std::string ir = llvm_ir_text(cast_kernel(kF32, kF16));
  EXPECT_TRUE(ir.find("define void @ampc_cast_f32_f16") != std::string::npos);
  EXPECT_THAT(ir, HasSubstr("vector.body")) << "the flat loop did not vectorise";
  // fp32 exp, erf and tanh are inline (kernels/shared/float_math.h), so they vectorise too;
  // fp64 calls the C library.
  for (const char* op : {"exp", "erf", "tanh"}) {
    const std::string f = llvm_ir_text(unary_kernel(op, kF32));
    EXPECT_THAT(f, HasSubstr("vector.body")) << op;
    EXPECT_THAT(f, Not(HasSubstr(std::string("@") + op + "f"))) << op;
  }
  EXPECT_THAT(llvm_ir_text(unary_kernel("exp", kF64)), HasSubstr("@exp("));
}

// The vector loop's elements per iteration and its vector width (lanes of its first float
// vector), read from the optimised IR.
std::pair<int, int> vector_step_and_width(const std::string& ir) {
  std::smatch step, width;
  EXPECT_TRUE(
      std::regex_search(ir, step, std::regex(R"(%index\.next = add nuw i64 %index, (\d+))")));
  EXPECT_TRUE(std::regex_search(ir, width, std::regex(R"(<(\d+) x float>)")));
  if (step.empty() || width.empty()) return {0, 0};
  return {std::stoi(step[1]), std::stoi(width[1])};
}

// fp32 exp, erf, tanh and sigmoid are long dependent chains of arithmetic: their loops
// interleave four vectors an iteration (ir_builder.cc's host_interleave), where LLVM alone
// took one or two.
TEST(CodegenHost, PolynomialLoopsInterleaveFourVectors) {
  for (const char* op : {"exp", "erf", "tanh", "sigmoid"}) {
    const auto [step, width] = vector_step_and_width(llvm_ir_text(unary_kernel(op, kF32)));
    EXPECT_EQ(step, 4 * width) << op;
  }
}

// A plan's worth of kernels (100 distinct) compiled in one HostKernels.
TEST(CodegenHost, CompileTimeOfHundredKernels) {
  std::vector<KernelDef> ks = coverage_kernels();
  ks.resize(100);
  std::vector<const KernelDef*> ptrs;
  for (const auto& k : ks) ptrs.push_back(&k);
  const auto t0 = std::chrono::steady_clock::now();
  HostKernels jit(ptrs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("HostKernels: 100 kernels compiled in %.3f s (%.2f ms per kernel)\n", s, s * 10);
  for (const auto& k : ks) EXPECT_NE(jit.find(k.name()), nullptr);
}

}  // namespace
}  // namespace ampc::kernels::codegen
