// refuse_misexported_circular_pad (passes/circular_pad_export.h) on hand-built graphs of the
// form torch.onnx.export writes for circular padding: torch 1.13's wrap before the input,
// Slice(x, [-(p+1)], [-1]), is refused naming the Concat (also where a negative pad crops x
// first); PyTorch's wrap, Slice(x, [-p], [INT64_MAX]), is not, nor is the wrong form in a file
// another producer wrote. That PyTorch's own circular padding trains as PyTorch does through
// ampc.export is python/tests/test_circular_padding.py's check, against PyTorch float64.
#include "passes/circular_pad_export.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/support/empty_model.h"

namespace ampc::passes {
namespace {

using Shape = std::vector<int64_t>;

struct PaddedGraph {
  std::unique_ptr<ir::Model> model = test::empty_model();
  ir::Graph& g = *model->graph;
  ir::Value* x = [this] {
    model->producer_name = "pytorch";
    ir::Value* v = g.add_value("x", {DType::kFloat32, Shape{1, 1, 4, 4}});
    v->is_graph_input = true;
    g.inputs.push_back(v);
    return v;
  }();
  int constants = 0;

  ir::Value* ints(std::vector<int64_t> values) {
    const std::string name = "c" + std::to_string(constants++);
    ir::Value* v = g.add_value(name, {DType::kInt64, Shape{static_cast<int64_t>(values.size())}});
    v->initializer = std::make_unique<ir::Tensor>(ir::tensor_of<int32_t>(
        DType::kInt64, DType::kInt64, {static_cast<int64_t>(values.size())}, values));
    v->initializer->name = name;
    g.initializers.push_back(v);
    return v;
  }

  // Slice(src, [start], [end], [axis]), of rank 4 (the check reads no more of its shape).
  ir::Value* slice(ir::Value* src, int64_t start, int64_t end, int64_t axis) {
    ir::Value* out =
        g.add_value("s" + std::to_string(constants), {DType::kFloat32, Shape{1, 1, -1, -1}});
    g.add_node("Slice", {src, ints({start}), ints({end}), ints({axis})}, {out},
               "/c/Slice_" + std::to_string(constants));
    return out;
  }

  // Concat(before, body, after) on `axis`, a graph output.
  void concat(ir::Value* before, ir::Value* body, ir::Value* after, int64_t axis) {
    ir::Value* y = g.add_value("y", {DType::kFloat32, Shape{1, 1, 6, 4}});
    ir::Node* n = g.add_node("Concat", {before, body, after}, {y}, "/c/Concat");
    n->attributes.emplace_back();
    n->attributes.back().name = "axis";
    n->attributes.back().kind = ir::AttrKind::kInt;
    n->attributes.back().i = axis;
    g.outputs.push_back(y);
  }
};

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

std::string refusal(const ir::Model& m) {
  try {
    refuse_misexported_circular_pad(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CircularPadExport, TorchsWrapBeforeTheInputIsRefusedByName) {
  PaddedGraph p;
  p.concat(p.slice(p.x, -2, -1, 2), p.x, p.slice(p.x, 0, 1, 2), 2);
  const std::string e = refusal(*p.model);
  EXPECT_NE(e.find("/c/Concat"), std::string::npos) << e;
  EXPECT_NE(e.find("circular"), std::string::npos) << e;
  EXPECT_NE(e.find("ampc.export"), std::string::npos) << e;
}

TEST(CircularPadExport, ANegativeAxisAndACroppedBodyAreRecognised) {
  PaddedGraph p;
  ir::Value* cropped = p.slice(p.x, 1, -1, -1);
  p.concat(p.slice(p.x, -3, -1, -1), cropped, p.slice(p.x, 0, 2, -1), 3);
  EXPECT_NE(refusal(*p.model).find("/c/Concat"), std::string::npos);
}

TEST(CircularPadExport, PyTorchsWrapIsAccepted) {
  PaddedGraph p;
  p.concat(p.slice(p.x, -1, kToEnd, 2), p.x, p.slice(p.x, 0, 1, 2), 2);
  EXPECT_EQ(refusal(*p.model), "");
}

TEST(CircularPadExport, OtherAxesOtherBodiesAndOtherProducersAreAccepted) {
  {
    PaddedGraph p;  // the slice along another axis than the Concat's
    p.concat(p.slice(p.x, -2, -1, 3), p.x, p.slice(p.x, 0, 1, 2), 2);
    EXPECT_EQ(refusal(*p.model), "");
  }
  {
    PaddedGraph p;  // the Concat's next input is not what was sliced
    ir::Value* other = p.g.add_value("other", p.x->type);
    other->is_graph_input = true;
    p.g.inputs.push_back(other);
    p.concat(p.slice(p.x, -2, -1, 2), other, p.slice(p.x, 0, 1, 2), 2);
    EXPECT_EQ(refusal(*p.model), "");
  }
  {
    PaddedGraph p;  // a file another tool wrote computes what it says
    p.model->producer_name = "onnx-example";
    p.concat(p.slice(p.x, -2, -1, 2), p.x, p.slice(p.x, 0, 1, 2), 2);
    EXPECT_EQ(refusal(*p.model), "");
  }
}

}  // namespace
}  // namespace ampc::passes
