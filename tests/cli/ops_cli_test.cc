// `ampc ops`: the operator list, checked against sources outside ampc's tables: the autocast
// classes that amp-semantics.md section 2 fixes (its ALLOW and DENY lists, copied here), and
// what the ONNX specification says an op is (a Reshape moves no data, a Relu is elementwise).
// Where the CUDA backend is built, the column says how it runs the op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

namespace ampc::testing {
namespace {
using json = nlohmann::json;
using ::testing::HasSubstr;

// amp-semantics.md section 2.
const char* const kAllow[] = {"MatMul", "Gemm", "Conv", "ConvTranspose",
                              "Einsum", "LSTM", "GRU",  "RNN"};
const char* const kDeny[] = {"Exp",
                             "Log",
                             "Pow",
                             "Reciprocal",
                             "Acos",
                             "Asin",
                             "Cosh",
                             "Sinh",
                             "Tan",
                             "Softplus",
                             "Softmax",
                             "LogSoftmax",
                             "LayerNormalization",
                             "InstanceNormalization",
                             "LpNormalization",
                             "ReduceSum",
                             "ReduceMean",
                             "ReduceProd",
                             "ReduceL1",
                             "ReduceL2",
                             "ReduceLogSum",
                             "ReduceLogSumExp",
                             "ReduceSumSquare",
                             "CumSum",
                             "SoftmaxCrossEntropyLoss",
                             "NegativeLogLikelihoodLoss",
                             "Resize",
                             "Upsample"};

json ops_json() {
  return json::parse(expect_success({"ops", "--format", "json"}));
}

const json& find(const json& rows, const std::string& domain, const std::string& op) {
  for (const json& r : rows)
    if (r["domain"] == domain && r["op"] == op) return r;
  static const json none;
  ADD_FAILURE() << "no row for " << domain << "." << op;
  return none;
}

TEST(OpsCli, OneRowPerOperatorSorted) {
  const json rows = ops_json();
  ASSERT_GT(rows.size(), 150u);
  std::set<std::pair<std::string, std::string>> seen;
  std::pair<std::string, std::string> last;
  for (const json& r : rows) {
    const std::pair<std::string, std::string> key = {r["domain"], r["op"]};
    EXPECT_TRUE(seen.insert(key).second) << key.first << "." << key.second << " twice";
    EXPECT_LT(last, key) << "not sorted at " << key.second;
    last = key;
    EXPECT_NE(key.first, "ampc.kernel") << "the compiler's own steps are not operators";
  }
}

TEST(OpsCli, AutocastClassesAreTheSemanticsDocuments) {
  const json rows = ops_json();
  for (const char* op : kAllow) EXPECT_EQ(find(rows, "", op)["autocast"], "allow") << op;
  for (const char* op : kDeny) EXPECT_EQ(find(rows, "", op)["autocast"], "deny") << op;
  EXPECT_EQ(find(rows, "", "Add")["autocast"], "follow");
  EXPECT_EQ(find(rows, "", "Cast")["autocast"], "keep");
}

TEST(OpsCli, FactsAndSupportOfKnownOperators) {
  const json rows = ops_json();
  const json& reshape = find(rows, "", "Reshape");
  EXPECT_EQ(reshape["pattern"], "view");
  const json& relu = find(rows, "", "Relu");
  EXPECT_EQ(relu["pattern"], "elementwise");
  EXPECT_EQ(relu["fused"], "unary");
  EXPECT_TRUE(relu["in_place"]);
  EXPECT_EQ(find(rows, "", "MatMul")["pattern"], "gemm");
  for (const char* op : {"Relu", "MatMul", "LayerNormalization", "Softmax", "Conv"}) {
    EXPECT_TRUE(find(rows, "", op)["cpu"]) << op;
    EXPECT_TRUE(find(rows, "", op)["gradient"]) << op;
  }
  // The ampc domain's ops are listed with their domain: the loss scaler's, the gradients'.
  EXPECT_TRUE(find(rows, "ampc", "UnscaleCheck")["cpu"]);
  EXPECT_TRUE(find(rows, "ampc", "ConvGrad")["cpu"]);
  if (relu["cuda"] == "n/a") GTEST_SKIP() << "ampc built without the CUDA backend";
  EXPECT_EQ(relu["cuda"], "generated");
  EXPECT_EQ(reshape["cuda"], "view");
  EXPECT_EQ(find(rows, "", "MatMul")["cuda"], "kernel");
  EXPECT_EQ(find(rows, "", "LayerNormalization")["cuda"], "kernel");
}

TEST(OpsCli, OneOperatorAsTextAndAnUnknownOneRefused) {
  const std::string text = expect_success({"ops", "--op", "LayerNormalization"});
  EXPECT_THAT(text, HasSubstr("pattern"));
  EXPECT_THAT(text, HasSubstr("LayerNormalization"));
  EXPECT_THAT(text, HasSubstr("rowwise"));
  EXPECT_THAT(text, HasSubstr("deny"));
  const json conv = json::parse(expect_success({"ops", "--op", "ampc.Conv", "--format", "json"}));
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0]["domain"], "ampc");
  EXPECT_THAT(expect_user_error({"ops", "--op", "NoSuchOp"}), HasSubstr("no operator 'NoSuchOp'"));
}

}  // namespace
}  // namespace ampc::testing
