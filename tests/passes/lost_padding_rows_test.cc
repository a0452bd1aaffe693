// lost_padding_row_warnings (passes/lost_padding_rows.h) on hand-built graphs of the form
// torch.onnx.export writes for nn.Embedding: a Gather of a trained table by run-time token
// indices. A table with exactly one all-zero row (nn.Embedding(padding_idx=p)'s start) is
// named with its row; none, or two, such rows, a frozen table, constant indices, another axis,
// lookups the model masks by their own indices, ampc's own exports, training-format models and
// other producers are not. That a plain torch export warns and ampc.export's file trains as
// PyTorch does is python/tests/test_embedding_options.py's check, against PyTorch float64.
#include "passes/lost_padding_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

struct Lookup {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;
  ir::Value* tokens = [this] {
    model->producer_name = "pytorch";
    ir::Value* v = g.add_value("tokens", {DType::kInt64, Shape{2, 3}});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }();

  // A trained [rows, 2] float32 table whose rows `zero` are zeros (the others 0.5).
  ir::Value* table(const std::string& name, int64_t rows, const std::vector<int64_t>& zero) {
    std::vector<float> data(static_cast<size_t>(rows * 2), 0.5f);
    for (int64_t r : zero) data[r * 2] = data[r * 2 + 1] = 0.0f;
    return initializer(name, DType::kFloat32, {rows, 2}, data.data(), data.size() * 4);
  }

  ir::Value* initializer(const std::string& name, DType dtype, Shape dims, const void* data,
                         size_t bytes) {
    ir::Value* v = g.add_value(name, {dtype, dims});
    v->initializer = std::make_unique<ir::Tensor>();
    v->initializer->name = name;
    v->initializer->dtype = dtype;
    v->initializer->dims = dims;
    v->initializer->bytes.resize(bytes);
    std::memcpy(v->initializer->bytes.data(), data, bytes);
    v->from_model = true;
    g.initializers.push_back(v);
    return v;
  }

  ir::Value* gather(ir::Value* t, ir::Value* indices, const std::string& name, int64_t axis = 0) {
    ir::Value* out = g.add_value(name + "_out", {t->type.dtype, Shape{2, 3, 2}});
    ir::Node* n = g.add_node("Gather", {t, indices}, {out}, name);
    if (axis != 0) {
      n->attributes.emplace_back();
      n->attributes.back().name = "axis";
      n->attributes.back().kind = ir::AttrKind::kInt;
      n->attributes.back().i = axis;
    }
    return out;
  }

  ir::Value* op(const std::string& type, std::vector<ir::Value*> in, ir::TensorType t) {
    ir::Value* out = g.add_value(type + std::to_string(g.nodes.size()), t);
    g.add_node(type, std::move(in), {out}, "/" + type + std::to_string(g.nodes.size()));
    return out;
  }

  std::vector<std::string> warnings(const AutodiffOptions& options = {}) const {
    return lost_padding_row_warnings(*model, options);
  }
};

TEST(LostPaddingRows, ATableWithOneZeroRowIsNamedWithItsRow) {
  Lookup l;
  l.gather(l.table("embed.weight", 5, {2}), l.tokens, "/embed/Gather");
  const auto w = l.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("node '/embed/Gather' (Gather): row 2 of 'embed.weight' is all zeros", 0),
            0u)
      << w[0];
  EXPECT_NE(w[0].find("nn.Embedding(padding_idx=2)"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("ampc.export"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("(tokens != 2)"), std::string::npos) << w[0];
}

TEST(LostPaddingRows, NegativeZerosAndBf16TablesCount) {
  Lookup l;
  std::vector<float> data = {0.5f, 1.0f, -0.0f, 0.0f, 2.0f, -1.0f};
  l.gather(l.initializer("a", DType::kFloat32, {3, 2}, data.data(), 24), l.tokens, "/a/Gather");
  std::vector<BFloat16> half = {BFloat16(-0.0f), BFloat16(-0.0f), BFloat16(1.0f), BFloat16(0.0f)};
  l.gather(l.initializer("b", DType::kBFloat16, {2, 2}, half.data(), 8), l.tokens, "/b/Gather");
  const auto w = l.warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("row 1 of 'a'"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("row 0 of 'b'"), std::string::npos) << w[1];
}

TEST(LostPaddingRows, NoZeroRowOrSeveralSayNothing) {
  Lookup l;
  l.gather(l.table("none", 4, {}), l.tokens, "/none/Gather");
  l.gather(l.table("two", 4, {0, 3}), l.tokens, "/two/Gather");
  l.gather(l.table("all", 1, {0}), l.tokens, "/all/Gather");  // one row: the whole table
  EXPECT_TRUE(l.warnings().empty());
}

TEST(LostPaddingRows, FrozenTablesConstantIndicesAndOtherAxesSayNothing) {
  Lookup l;
  l.gather(l.table("frozen.weight", 4, {0}), l.tokens, "/frozen/Gather");
  const int64_t picks[2] = {0, 1};
  ir::Value* constant = l.initializer("picks", DType::kInt64, {2}, picks, 16);
  constant->from_model = false;
  l.gather(l.table("picked", 4, {0}), constant, "/picked/Gather");
  l.gather(l.table("columns", 4, {0}), l.tokens, "/columns/Gather", 1);
  AutodiffOptions frozen;
  frozen.freeze = {"frozen.*"};
  EXPECT_TRUE(l.warnings(frozen).empty());
  EXPECT_EQ(l.warnings().size(), 1u);  // the frozen one, trained after all
}

TEST(LostPaddingRows, ATableReadTwiceIsNamedOnce) {
  Lookup l;
  ir::Value* t = l.table("shared", 4, {1});
  l.gather(t, l.tokens, "/enc/Gather");
  l.gather(t, l.tokens, "/dec/Gather");
  const auto w = l.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'/enc/Gather'"), std::string::npos) << w[0];
}

// emb(t) * (t != p).unsqueeze(-1) and emb(t).masked_fill((t == p).unsqueeze(-1), 0): the model
// keeps row p untrained itself; a Mul by anything else does not.
TEST(LostPaddingRows, LookupsMaskedByTheirOwnIndicesSayNothing) {
  Lookup l;
  const int64_t zero = 0;
  ir::Value* p = l.initializer("p", DType::kInt64, {}, &zero, 8);
  p->from_model = false;
  const ir::TensorType mask{DType::kBool, Shape{2, 3}};
  ir::Value* keep = l.op("Not", {l.op("Equal", {l.tokens, p}, mask)}, mask);
  ir::Value* keep_f = l.op("Cast", {keep}, {DType::kFloat32, Shape{2, 3}});
  ir::Value* keep_3 = l.op("Unsqueeze", {keep_f}, {DType::kFloat32, Shape{2, 3, 1}});
  ir::Value* a = l.gather(l.table("a", 4, {0}), l.tokens, "/a/Gather");
  l.op("Mul", {a, keep_3}, {DType::kFloat32, Shape{2, 3, 2}});
  ir::Value* pad =
      l.op("Unsqueeze", {l.op("Equal", {l.tokens, p}, mask)}, {DType::kBool, Shape{2, 3, 1}});
  ir::Value* b = l.gather(l.table("b", 4, {0}), l.tokens, "/b/Gather");
  const float zf = 0.0f;
  ir::Value* fill = l.initializer("fill", DType::kFloat32, {}, &zf, 4);
  fill->from_model = false;
  l.op("Where", {pad, fill, b}, {DType::kFloat32, Shape{2, 3, 2}});
  EXPECT_TRUE(l.warnings().empty());

  const float half = 0.5f;
  ir::Value* scale = l.initializer("scale", DType::kFloat32, {}, &half, 4);
  scale->from_model = false;
  l.op("Mul", {a, scale}, {DType::kFloat32, Shape{2, 3, 2}});  // a second, unmasked reader
  const auto w = l.warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("of 'a'"), std::string::npos) << w[0];
}

TEST(LostPaddingRows, AmpcExportsTrainingFormatAndOtherProducersSayNothing) {
  {
    Lookup l;
    l.gather(l.table("t", 4, {0}), l.tokens, "/t/Gather");
    l.model->metadata.push_back({kStopGradientKey, ""});
    EXPECT_TRUE(l.warnings().empty());
  }
  {
    Lookup l;
    ir::Value* t = l.table("t", 4, {0});
    l.gather(t, l.tokens, "/t/Gather");
    l.model->state_updates.push_back({t, t});
    EXPECT_TRUE(l.warnings().empty());
  }
  {
    Lookup l;
    l.gather(l.table("t", 4, {0}), l.tokens, "/t/Gather");
    l.model->producer_name = "tf2onnx";
    EXPECT_TRUE(l.warnings().empty());
  }
}

}  // namespace
}  // namespace ampc::passes
