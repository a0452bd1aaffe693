// torch's GELU as its exporter writes it. torch 1.13 exports nn.GELU() and F.gelu (the erf
// form, approximate="none") as five elementwise nodes,
//
//   y = Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)
//
// while PyTorch computes gelu as one op: in fp32 ("opmath") and rounded once to x's type, in
// its CPU bf16 kernel and its CUDA kernels alike (and gelu_backward the same way). Autocast
// uses this to run such a chain as PyTorch runs gelu (passes/autocast.cc); this file only
// finds them.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace ampc::passes {

struct ErfGelu {
  ir::Value* x = nullptr;        // the GELU's input
  std::vector<ir::Node*> nodes;  // Div (or Mul by 1/sqrt(2)), Erf, Add, Mul, Mul
  ir::Node* last() const { return nodes.back(); }
};

// Every such chain of the main graph, in node order. The scalar constants may stand on
// either side of their commutative ops and be f32 or f64 (1/sqrt(2) and sqrt(2) to within
// 1e-6); each intermediate result must be read only by the next node of the chain and not
// be a graph output, so the five nodes compute nothing but the GELU.
std::vector<ErfGelu> find_erf_gelus(const ir::Graph& g);

}  // namespace ampc::passes
