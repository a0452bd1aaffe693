// The op table (ops/op_table.cc) against what it describes: ONNX's schemas, the code
// generator's instruction set and the per-op registries that key by the same OpKey.
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <set>
#include <string>

#include "kernels/codegen/instr_set.h"
#include "ops/op_info.h"
#include "ops/op_key.h"
#include "ops/op_map.h"
#include "passes/autodiff/gradient_registry.h"
#include "runtime/cpu/op_registry.h"

namespace ampc {
namespace {

std::string name(const ops::OpInfo& info) {
  return ops::OpKey(info.domain, info.op).str();
}

// A misspelt row would silently give an op the defaults. Debian's libonnx (1.12, opset 17)
// predates two rows: GroupNormalization (opset 18) and Gelu (opset 20).
TEST(OpInfo, EveryRowIsAnOperatorOfItsDomain) {
  ASSERT_GT(ops::all_op_infos().size(), 50u);
  const std::set<std::string> newer = {"Gelu", "GroupNormalization"};
  for (const ops::OpInfo& info : ops::all_op_infos()) {
    const std::string domain = info.domain.empty() ? onnx::ONNX_DOMAIN : std::string(info.domain);
    if (newer.count(name(info))) {
      EXPECT_EQ(onnx::OpSchemaRegistry::Schema(std::string(info.op), domain), nullptr);
      continue;
    }
    EXPECT_NE(onnx::OpSchemaRegistry::Schema(std::string(info.op), domain), nullptr) << name(info);
  }
}

TEST(OpInfo, LookupIgnoresHowTheDefaultDomainIsSpelled) {
  const ops::OpInfo* relu = ops::find_op_info("", "Relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(ops::find_op_info("ai.onnx", "Relu"), relu);
  EXPECT_EQ(ops::find_op_info("ampc", "Relu"), nullptr);
  EXPECT_EQ(ops::find_op_info("", "NoSuchOp"), nullptr);
  EXPECT_EQ(ops::op_info("", "NoSuchOp").pattern, ops::Pattern::kOpaque);
  EXPECT_EQ(ops::op_info("", "NoSuchOp").precision, ops::Precision::kFollow);
}

// What fusion accepts, the kernel builder must be able to emit and the CPU must run unfused
// (the host JIT's results are checked against the CPU op).
TEST(OpInfo, FusedOpsAreKernelInstructionsWithACpuOp) {
  int fused = 0;
  for (const ops::OpInfo& info : ops::all_op_infos()) {
    if (info.fused == ops::FusedForm::kNone) {
      EXPECT_TRUE(info.instruction.empty()) << name(info);
      continue;
    }
    ++fused;
    EXPECT_NE(rt::cpu::OpRegistry::instance().find(std::string(info.op), std::string(info.domain)),
              nullptr)
        << name(info);
    const bool expanded =
        info.fused == ops::FusedForm::kVariadic || info.fused == ops::FusedForm::kClip ||
        info.fused == ops::FusedForm::kActivation || info.fused == ops::FusedForm::kPRelu ||
        info.fused == ops::FusedForm::kCast || info.fused == ops::FusedForm::kIdentity;
    if (expanded) {
      EXPECT_TRUE(info.instruction.empty()) << name(info);
    } else {
      EXPECT_GE(kernels::codegen::arity(std::string(info.instruction)), 1) << name(info);
    }
  }
  EXPECT_GE(fused, 30);
}

TEST(OpInfo, FlagsAgreeWithThePattern) {
  for (const ops::OpInfo& info : ops::all_op_infos()) {
    if (info.in_place) {
      EXPECT_EQ(info.pattern, ops::Pattern::kElementwise) << name(info);
    }
    if (info.is_view()) {
      EXPECT_TRUE(info.moves_elements) << name(info);
    }
    if (info.moves_elements) {
      EXPECT_EQ(info.precision, ops::Precision::kFollow) << name(info);
      EXPECT_TRUE(info.exact_float) << name(info);  // moving elements never rounds
    }
    if (info.random) {
      EXPECT_FALSE(info.exact_float || info.in_place) << name(info);
    }
    if (info.exact_float) {  // autocast keeps in fp32 what rounds differently in 16 bits
      EXPECT_NE(info.precision, ops::Precision::kDeny) << name(info);
    }
  }
}

// The three registries of code per op key alike: a model that spells the default domain
// "ai.onnx" finds the same CPU op and gradient rule.
TEST(OpKey, RegistriesAgreeOnTheDefaultDomain) {
  const auto& cpu = rt::cpu::OpRegistry::instance();
  ASSERT_NE(cpu.find("Relu", ""), nullptr);
  EXPECT_EQ(cpu.find("Relu", "ai.onnx"), cpu.find("Relu", ""));
  const auto& grads = passes::autodiff::GradientRegistry::instance();
  ASSERT_NE(grads.find({"", "Relu"}), nullptr);
  EXPECT_EQ(grads.find({"ai.onnx", "Relu"}), grads.find({"", "Relu"}));
  EXPECT_NE(grads.find({"ampc", "AllReduceSum"}), nullptr);
  EXPECT_EQ(grads.find({"", "AllReduceSum"}), nullptr);
  EXPECT_EQ(ops::OpKey("ai.onnx", "Relu").str(), "Relu");
  EXPECT_EQ(ops::OpKey("ampc", "AllReduceSum").str(), "ampc.AllReduceSum");
}

// One definition per operator: a registry refuses a second entry for an op, however its
// domain is spelt, and keeps the first one's code.
TEST(OpMap, ASecondDefinitionOfAnOpIsRefusedNamingIt) {
  ops::OpMap<int> map("gradient rule");
  map.add({"", "Relu"}, 1);
  map.add({"ampc", "Relu"}, 2);  // another domain: another op
  try {
    map.add({"ai.onnx", "Relu"}, 3);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "gradient rule for 'Relu' is defined twice");
  }
  ASSERT_NE(map.find({"", "Relu"}), nullptr);
  EXPECT_EQ(*map.find({"", "Relu"}), 1);
  EXPECT_EQ(map.find({"", "Elu"}), nullptr);
  EXPECT_EQ(map.keys().size(), 2u);
}

}  // namespace
}  // namespace ampc
