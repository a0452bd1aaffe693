// concat_summed_pads (passes/summed_pads.h): a tree of Adds over Pad(part_i, pads_i) whose
// parts tile one axis exactly becomes one Concat of the parts in the order of their places,
// and the compiled plan computes the sum (each element its part's, checked here element by
// element). Left as they are: parts with a gap or an overlap, parts on two axes or padded on
// two axes, a term also read elsewhere, a pad value other than 0, another padding mode, a
// single Pad. The gradient of a Slice-cut tensor against PyTorch: the zoo's attention models
// (tests/zoo), whose nn.MultiheadAttention cuts its packed projection so.
#include "passes/summed_pads.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/half.h"
#include "driver/pipeline.h"
#include "ir/tensor.h"
#include "runtime/cpu/executor.h"
#include "tests/support/float_values.h"

namespace ampc::passes {
namespace {

using test::from_float;
using test::to_float;

constexpr int64_t kRows = 3, kCols = 4;

// y [kRows, kCols, size] = sum_i Pad(part_i), part i [kRows, kCols, sizes[i]] placed at
// begins[i] of the last axis; the Adds chained in the parts' order.
struct PaddedSum {
  std::unique_ptr<ir::Model> model = std::make_unique<ir::Model>();
  std::vector<ir::Value*> terms;
  DType t;

  PaddedSum(const std::vector<int64_t>& sizes, const std::vector<int64_t>& begins, int64_t size,
            DType type = DType::kFloat32)
      : t(type) {
    model->opsets.push_back({"", 17});
    model->graph->name = "padded_sum";
    ir::Graph& g = *model->graph;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::string s = std::to_string(i);
      ir::Value* x = g.add_value("part" + s, {t, std::vector<int64_t>{kRows, kCols, sizes[i]}});
      x->is_graph_input = true;
      g.inputs.push_back(x);
      ir::Value* pads = ints("pads" + s, {0, 0, begins[i], 0, 0, size - begins[i] - sizes[i]});
      ir::Value* y = g.add_value("term" + s, {t, std::vector<int64_t>{kRows, kCols, size}});
      g.add_node("Pad", {x, pads}, {y}, "pad" + s);
      terms.push_back(y);
    }
    ir::Value* acc = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      ir::Value* y = g.add_value("sum" + std::to_string(i), acc->type);
      g.add_node("Add", {acc, terms[i]}, {y}, "add" + std::to_string(i));
      acc = y;
    }
    g.outputs.push_back(acc);
  }

  ir::Value* constant(const std::string& name, DType type, std::vector<int64_t> dims,
                      const void* data, size_t bytes) {
    ir::Tensor c;
    c.name = name;
    c.dtype = type;
    c.dims = std::move(dims);
    c.bytes.resize(bytes);
    std::memcpy(c.bytes.data(), data, bytes);
    ir::Value* v = model->graph->add_value(name, {type, c.dims});
    v->initializer = std::make_unique<ir::Tensor>(std::move(c));
    model->graph->initializers.push_back(v);
    return v;
  }

  ir::Value* ints(const std::string& name, const std::vector<int64_t>& values) {
    return constant(name, DType::kInt64, {static_cast<int64_t>(values.size())}, values.data(),
                    values.size() * sizeof(int64_t));
  }

  ir::Node* pad(size_t i) const { return terms[i]->producer; }
  const ir::Node* output_producer() const { return model->graph->outputs[0]->producer; }
};

TEST(ConcatSummedPads, PartsThatTileAnAxisBecomeOneConcatInTheirPlacesOrder) {
  PaddedSum s({3, 2, 4}, {2, 0, 5}, 9);  // the terms out of order
  EXPECT_EQ(concat_summed_pads(*s.model), 1);
  const ir::Node* c = s.output_producer();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->op_type, "Concat");
  ASSERT_EQ(c->inputs.size(), 3u);
  EXPECT_EQ(c->inputs[0]->name, "part1");
  EXPECT_EQ(c->inputs[1]->name, "part0");
  EXPECT_EQ(c->inputs[2]->name, "part2");
  ASSERT_TRUE(c->attr("axis"));
  EXPECT_EQ(c->attr("axis")->i, 2);
  EXPECT_EQ(c->outputs[0]->name, "sum2");  // readers keep naming the sum
  EXPECT_EQ(*c->outputs[0]->type.shape, (std::vector<int64_t>{kRows, kCols, 9}));
}

TEST(ConcatSummedPads, LeavesOtherSumsAlone) {
  {  // a gap: nothing at [2, 3)
    PaddedSum s({2, 4}, {0, 3}, 7);
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // an overlap: [0, 3) and [2, 6)
    PaddedSum s({3, 4}, {0, 2}, 6);
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // an overlap ([1, 2)) and a gap ([3, 4)) of one size: the sizes add up to the axis
    PaddedSum s({2, 2, 1}, {0, 1, 4}, 5);
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // a term that is also a graph output
    PaddedSum s({2, 3}, {0, 2}, 5);
    s.model->graph->outputs.push_back(s.terms[1]);
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // a pad value of 1
    PaddedSum s({2, 3}, {0, 2}, 5);
    const float one = 1.0f;
    ir::Value* v = s.constant("one", DType::kFloat32, {}, &one, sizeof one);
    s.pad(0)->inputs.push_back(v);
    v->uses.push_back({s.pad(0), 2});
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // reflect mode
    PaddedSum s({2, 3}, {0, 2}, 5);
    s.pad(1)->attributes.push_back(ir::Attribute::make_string("mode", "reflect"));
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // a term padded on a second axis too
    PaddedSum s({2, 3}, {0, 2}, 5);
    ir::Tensor& pads = *s.pad(1)->inputs[1]->initializer;
    int64_t one = 1;
    std::memcpy(pads.bytes.data() + 4 * sizeof(int64_t), &one, sizeof one);  // after, axis 1
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
  {  // a single Pad: no sum
    PaddedSum s({2}, {1}, 4);
    EXPECT_EQ(concat_summed_pads(*s.model), 0);
  }
}

// The compiled CPU plan (the pass runs in every pipeline: no Pad step is left): each element
// of the sum is its part's element, in float32 and bfloat16 alike.
template <typename T>
void check_plan(DType t) {
  const std::vector<int64_t> sizes = {3, 2, 4}, begins = {2, 0, 5};
  constexpr int64_t kSize = 9;
  PaddedSum s(sizes, begins, kSize, t);
  EXPECT_EQ(concat_summed_pads(*PaddedSum(sizes, begins, kSize, t).model), 1);  // the plan's
  compiler::CompileOptions o;
  o.lowering.target = "cpu";
  plan::Plan compiled = compiler::compile_model(*s.model, o, "padded_sum");
  for (const plan::Step& step : compiled.steps()) EXPECT_NE(step.op(), "Pad");
  rt::cpu::Executor exec(std::move(compiled));
  std::map<std::string, rt::Tensor> feeds;
  std::vector<float> want(kRows * kCols * kSize, -1.0f);
  for (size_t i = 0; i < sizes.size(); ++i) {
    rt::Tensor x(t, {kRows, kCols, sizes[i]});
    for (int64_t j = 0; j < x.numel(); ++j) {
      const float v = static_cast<float>(static_cast<int64_t>(i) * 100 + j) * 0.25f - 7.0f;
      x.data<T>()[j] = from_float<T>(v);
      const int64_t row = j / sizes[i], col = j % sizes[i];
      want[static_cast<size_t>(row * kSize + begins[i] + col)] = to_float(from_float<T>(v));
    }
    feeds["part" + std::to_string(i)] = x;
  }
  auto out = exec.run(feeds);
  const rt::Tensor& y = out.at("sum2");
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size()));
  for (int64_t j = 0; j < y.numel(); ++j) {
    EXPECT_EQ(to_float(y.data<T>()[j]), want[static_cast<size_t>(j)]) << j;
  }
}

TEST(ConcatSummedPads, CompiledPlanPlacesEachPart) {
  check_plan<float>(DType::kFloat32);
  check_plan<BFloat16>(DType::kBFloat16);
}

}  // namespace
}  // namespace ampc::passes
