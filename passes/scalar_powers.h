// Pow with a constant scalar exponent of 1, 2, 3, -1, -2, 0.5 or -0.5 computed as PyTorch
// computes a tensor to such a power (its pow kernel's special cases, CPU and CUDA alike):
//
//   x^1 = x          x^2 = x * x        x^3 = (x * x) * x
//   x^-1 = 1 / x     x^-2 = 1 / (x * x)
//   x^0.5 = sqrt(x)  x^-0.5 = 1 / sqrt(x)
//
// each operation correctly rounded, so the results are PyTorch's bit for bit (a correctly
// rounded pow differs from (x * x) * x in the last bit now and then, and PyTorch's sqrt keeps
// sqrt's -0 -> -0 and -inf -> NaN where pow gives +0 and +inf). It is also what makes them fast:
// a Pow is a call of the C library's scalar pow on the CPU, which keeps a fused kernel's loop
// scalar (torch's tanh GELU, x + 0.044715 x^3, and an RMSNorm's x^2 spent most of a training
// step there). Run after autodiff (whose Pow rule, p x^(p-1), makes the backward's powers:
// x^2 for a cube, x^-0.5 for a square root) and the step's constant folding; float32 and
// float64 bases only (a 16-bit Pow keeps computing in fp32 and rounding once). An exponent
// whose data may change (passes/constant_folding.h's variable_values: Adam's bias correction,
// beta^step, reads the step counter) stays a Pow.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace ampc::passes {

// The nodes that replace Pow 'NAME' are named NAME + kPowerInfix + ...: the precision report
// gives them the Pow's autocast decision.
inline constexpr std::string_view kPowerInfix = "/power/";

// The name of the Pow that `node` (a node's name) computes part of; empty for another node.
inline std::string_view rewritten_pow(std::string_view node) {
  const size_t at = node.rfind(kPowerInfix);
  return at == std::string_view::npos ? std::string_view() : node.substr(0, at);
}

// Rewrites every such Pow of the main graph whose output has its base's type; returns how many.
int expand_scalar_powers(ir::Model& model);

}  // namespace ampc::passes
