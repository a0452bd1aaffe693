// The op table (ops/op_table.cc) against what it describes: ONNX's schemas, the code
// generator's instruction set and the per-op registries that key by the same OpKey.
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <set>
#include <string>

#include "kernels/codegen/instr_set.h"
#include "ops/ampc_forms.h"
#include "ops/op_info.h"
#include "ops/op_key.h"
#include "ops/op_map.h"
#include "ops/schemas/ampc_schemas.h"
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
  ops::register_ampc_schemas();  // the rows of ampc's forms of ONNX's activations
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

// The activations' ampc forms (ops/ampc_forms.h) are ONNX's ops with every float type: the
// schema has ONNX's attributes with their defaults and allows float16 and bfloat16; the op
// table, the CPU backend and autodiff treat them as the ONNX ops.
TEST(AmpcForms, ActivationFormsAreOnnxOpsWithEveryFloatType) {
  ops::register_ampc_schemas();
  const auto& cpu = rt::cpu::OpRegistry::instance();
  const auto& grads = passes::autodiff::GradientRegistry::instance();
  ASSERT_EQ(ops::ampc_activation_forms().size(), 7u);
  for (std::string_view view : ops::ampc_activation_forms()) {
    const std::string op(view);
    EXPECT_TRUE(ops::has_ampc_form(op)) << op;
    const onnx::OpSchema* onnx_schema = onnx::OpSchemaRegistry::Schema(op, 17);
    const onnx::OpSchema* form = onnx::OpSchemaRegistry::Schema(op, 1, "ampc");
    ASSERT_NE(onnx_schema, nullptr) << op;
    ASSERT_NE(form, nullptr) << op;
    std::set<std::string> onnx_types, form_types;
    for (const auto& c : onnx_schema->typeConstraintParams())
      onnx_types.insert(c.allowed_type_strs.begin(), c.allowed_type_strs.end());
    for (const auto& c : form->typeConstraintParams())
      form_types.insert(c.allowed_type_strs.begin(), c.allowed_type_strs.end());
    EXPECT_EQ(onnx_types.count("tensor(bfloat16)"), 0u) << op << ": ONNX's has bf16 now";
    EXPECT_EQ(form_types, (std::set<std::string>{"tensor(float16)", "tensor(bfloat16)",
                                                 "tensor(float)", "tensor(double)"}))
        << op;
    ASSERT_EQ(form->attributes().size(), onnx_schema->attributes().size()) << op;
    for (const auto& [attr, a] : onnx_schema->attributes()) {
      const auto it = form->attributes().find(attr);
      ASSERT_NE(it, form->attributes().end()) << op << " " << attr;
      EXPECT_EQ(it->second.type, a.type) << op << " " << attr;
      EXPECT_EQ(it->second.default_value.SerializeAsString(), a.default_value.SerializeAsString())
          << op << " " << attr;
    }
    const ops::OpInfo* onnx_row = ops::find_op_info("", op);
    const ops::OpInfo* form_row = ops::find_op_info("ampc", op);
    ASSERT_NE(onnx_row, nullptr) << op;
    ASSERT_NE(form_row, nullptr) << op;
    EXPECT_EQ(form_row->fused, onnx_row->fused) << op;
    EXPECT_EQ(form_row->pattern, onnx_row->pattern) << op;
    EXPECT_EQ(form_row->in_place, onnx_row->in_place) << op;
    EXPECT_NE(cpu.find(op, "ampc"), nullptr) << op;
    EXPECT_NE(grads.find({"ampc", op}), nullptr) << op;
  }
  for (const char* op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool"})
    EXPECT_TRUE(ops::has_ampc_form(op)) << op;
  EXPECT_FALSE(ops::has_ampc_form("Relu"));  // ONNX's has bfloat16 since opset 14
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
