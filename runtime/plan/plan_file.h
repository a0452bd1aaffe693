// Reading and writing plan files. Layout (little-endian):
//   8 bytes  magic "AMPCPLAN"
//   4 bytes  format version (kPlanFormatVersion)
//   8 bytes  payload size
//   8 bytes  FNV-1a 64 checksum of the payload
//   payload  serialised ampc.plan.Plan
// A plan of another format version, a truncated file or a checksum mismatch is refused.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan/plan.pb.h"

namespace ampc::plan {

// 2: typed training signature (Plan.training) and step phases.
// 3: typed step parameters (Step.params) for the row-wise ops, reductions,
//    BatchNormalization, the losses, pooling and convolution, resolved by legalize; older
//    plans are refused (recompile).
// 4: typed GEMM parameters (Step.params.gemm: transposes, alpha, beta, the epilogue) in place
//    of Gemm's attributes, the folded-transpose attributes and Step.epilogue; typed parameters
//    of the data movement both backends run (Transpose, Concat, Split, Gather, Cast, Slice,
//    Pad, ScatterND and ScatterElements, the all-reduce's start and wait).
// 5: a MatMul's operand and result transposes of any permutation (GemmParams.perm_a, perm_b,
//    perm_y; CPU plans): a runtime that ignored them would compute another product.
// 6: all-zero initial values without their bytes (TensorData.zeros) and rounded copies
//    without an initial value (their masters', rounded): a version 5 runtime would refuse
//    them as short of data.
// 7: typed Dropout parameters (Step.params.dropout), which both backends now run.
// 8: typed parameters of ConvTranspose (WindowParams with output_padding and output_shape),
//    DepthToSpace and SpaceToDepth (Step.params.block) and ConstantOfShape (Step.params.fill),
//    in place of their attributes, which a version 7 runtime would still look for.
inline constexpr uint32_t kPlanFormatVersion = 8;

std::string serialize_plan(const Plan& plan);
// The header (magic, version, size, checksum) followed by an already serialised payload.
std::string frame_plan_payload(const std::string& payload);
Plan parse_plan(const std::string& bytes, const std::string& what);

void save_plan(const Plan& plan, const std::string& path);
Plan load_plan(const std::string& path);

// True when the file starts with the plan magic (used to tell plans from ONNX models).
bool looks_like_plan(const std::string& path);

}  // namespace ampc::plan
