// find_nonfinite_origin on a model built to overflow at a known node (made with ONNX's
// Python helper at test time): y = Exp(x * 100) overflows for x = 10 at node "exp_node",
// while a Where that selects a -inf mask constant and the Softmax over it (finite) are not
// reported; a NaN in the data is reported as the input's. A fused plan's origin is the
// kernel step, named by its nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>

#include "driver/pipeline.h"
#include "runtime/cpu/nonfinite_search.h"
#include "tests/support/temp_dir.h"

namespace ampc::rt::cpu {
namespace {
using ::testing::HasSubstr;

constexpr const char* kMakeModel = R"(
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
nodes = [
    h.make_node("Where", ["mask", "x", "ninf"], ["masked"], name="mask_node"),
    h.make_node("Softmax", ["masked"], ["probs"], name="softmax_node", axis=0),
    h.make_node("Mul", ["x", "hundred"], ["scaled"], name="scale_node"),
    h.make_node("Exp", ["scaled"], ["e"], name="exp_node"),
    h.make_node("Add", ["probs", "e"], ["y"], name="add_node"),
]
inits = [nh.from_array(np.array([True, True, False, False]), "mask"),
         nh.from_array(np.full(4, -np.inf, np.float32), "ninf"),
         nh.from_array(np.array(100, np.float32), "hundred")]
g = h.make_graph(nodes, "overflow", [h.make_tensor_value_info("x", T.FLOAT, [4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [4])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
)";

class NonFiniteSearch : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string script = dir_ / "make.py";
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs(kMakeModel, f);
    std::fclose(f);
    const std::string cmd = "/usr/bin/python3 '" + script + "' '" + (dir_ / "m.onnx") + "'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  Tensor x(std::vector<float> v) {
    Tensor t(DType::kFloat32, {4});
    for (int i = 0; i < 4; ++i) t.data<float>()[i] = v[static_cast<size_t>(i)];
    return t;
  }

  test::TempDir dir_;
};

TEST_F(NonFiniteSearch, NamesTheNodeThatOverflows) {
  compiler::CompileOptions unfused;
  unfused.lowering.fuse = false;
  Executor exec(compiler::compile_file(dir_ / "m.onnx", unfused));
  const auto origin = find_nonfinite_origin(exec, {{"x", x({0.1f, 10.f, 0.2f, 0.3f})}});
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->node, "exp_node");
  EXPECT_EQ(origin->op, "Exp");
  EXPECT_EQ(origin->phase, "forward");
  EXPECT_EQ(origin->value.inf, 1);
  EXPECT_EQ(origin->value.nan, 0);
  ASSERT_EQ(origin->inputs.size(), 1u);
  EXPECT_FLOAT_EQ(origin->inputs[0].max_abs, 1000.f);
  EXPECT_THAT(describe(*origin), HasSubstr("forward node 'exp_node' (Exp) produced"));
  // The search leaves the executor usable: a normal run gives the same infinity.
  const Tensor y = exec.run({{"x", x({0.1f, 10.f, 0.2f, 0.3f})}}).at("y");
  EXPECT_TRUE(std::isinf(y.data<float>()[1]));
}

// In a fused plan the search names the kernel step, by all of its nodes.
TEST_F(NonFiniteSearch, NamesTheNodesOfAFusedKernel) {
  Executor exec(compiler::compile_file(dir_ / "m.onnx", {}));
  const auto origin = find_nonfinite_origin(exec, {{"x", x({0.1f, 10.f, 0.2f, 0.3f})}});
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->node, "scale_node, exp_node, add_node");
  EXPECT_EQ(origin->op, "ampc.kernel.FusedElementwise");
  EXPECT_EQ(origin->phase, "forward");
  EXPECT_EQ(origin->value.inf, 1);
  EXPECT_THAT(describe(*origin),
              HasSubstr("forward nodes 'scale_node, exp_node, add_node' (ampc.kernel."));
}

TEST_F(NonFiniteSearch, FiniteStepAndMaskConstantsAreNotReported) {
  Executor exec(compiler::compile_file(dir_ / "m.onnx", {}));
  EXPECT_FALSE(find_nonfinite_origin(exec, {{"x", x({0.1f, 0.5f, 0.2f, 0.3f})}}).has_value());
}

TEST_F(NonFiniteSearch, ReportsNonFiniteData) {
  Executor exec(compiler::compile_file(dir_ / "m.onnx", {}));
  const auto origin = find_nonfinite_origin(exec, {{"x", x({0.1f, NAN, 0.2f, 0.3f})}});
  ASSERT_TRUE(origin.has_value());
  EXPECT_EQ(origin->phase, "input");
  EXPECT_EQ(origin->value.name, "x");
  EXPECT_EQ(origin->value.nan, 1);
  EXPECT_THAT(describe(*origin), HasSubstr("input 'x' already holds non-finite values"));
}

}  // namespace
}  // namespace ampc::rt::cpu
