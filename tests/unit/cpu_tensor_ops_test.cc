// CPU shape, layout and indexing operators called through the registry with hand-built plan
// steps, checked against values computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/op_registry.h"
#include "tests/unit/step_test_helpers.h"

namespace ampc::rt::cpu {
namespace {

using testing::set_int;
using testing::set_ints;
using testing::set_string;
using Shape = std::vector<int64_t>;

std::vector<Tensor> run(const std::string& op, const std::vector<const Tensor*>& inputs,
                        int outputs = 1, const testing::AttrFn& attrs = {}, int64_t opset = 17) {
  return testing::run_op(op, inputs, outputs, attrs, opset);
}

template <typename T>
Tensor make(Shape shape, const std::vector<T>& values) {
  Tensor t(dtype_of<T>(), std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

Tensor iota(Shape shape) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

Tensor ints(const std::vector<int64_t>& v) {
  return make<int64_t>({static_cast<int64_t>(v.size())}, v);
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}
std::vector<float> fv(const Tensor& t) {
  return values<float>(t);
}

TEST(CpuTensorOps, ReshapeCopiesZeroAndInfersMinusOne) {
  const Tensor x = iota({2, 3, 4});
  const Tensor s = ints({0, -1});
  const auto y = run("Reshape", {&x, &s});
  EXPECT_EQ(y[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(fv(y[0]), fv(x));
  const Tensor e = iota({0, 3});
  const Tensor z = ints({3, 0});
  auto allow = [](plan::Step& st) { set_int(st, "allowzero", 1); };
  EXPECT_EQ(run("Reshape", {&e, &z}, 1, allow)[0].shape(), (Shape{3, 0}));
  const Tensor bad = ints({5, -1});
  EXPECT_THROW(run("Reshape", {&x, &bad}), Error);
}

TEST(CpuTensorOps, SqueezeUnsqueezeFlattenTakeAxesByOpset) {
  const Tensor x = iota({1, 3, 1});
  EXPECT_EQ(run("Squeeze", {&x})[0].shape(), (Shape{3}));
  const Tensor ax = ints({-1});
  EXPECT_EQ(run("Squeeze", {&x, &ax})[0].shape(), (Shape{1, 3}));
  auto attr_axes = [](plan::Step& s) { set_ints(s, "axes", {0, 3}); };
  EXPECT_EQ(run("Unsqueeze", {&x}, 1, attr_axes, 11)[0].shape(), (Shape{1, 1, 3, 1, 1}));
  const Tensor uax = ints({1, -1});
  EXPECT_EQ(run("Unsqueeze", {&x, &uax})[0].shape(), (Shape{1, 1, 3, 1, 1}));
  const Tensor f = iota({2, 3, 4});
  EXPECT_EQ(run("Flatten", {&f})[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(run("Flatten", {&f}, 1, [](plan::Step& s) { set_int(s, "axis", -1); })[0].shape(),
            (Shape{6, 4}));
}

TEST(CpuTensorOps, ShapeSizeRangeEyeLikeConstantOfShape) {
  const Tensor x = iota({2, 3, 4});
  auto se = [](plan::Step& s) {
    set_int(s, "start", -2);
    set_int(s, "end", 10);
  };
  EXPECT_EQ(values<int64_t>(run("Shape", {&x}, 1, se)[0]), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values<int64_t>(run("Size", {&x})[0]), (std::vector<int64_t>{24}));
  const Tensor a = make<int32_t>({}, {10}), b = make<int32_t>({}, {3}), d = make<int32_t>({}, {-3});
  EXPECT_EQ(values<int32_t>(run("Range", {&a, &b, &d})[0]), (std::vector<int32_t>{10, 7, 4}));
  const Tensor e = iota({2, 3});
  const auto eye = run("EyeLike", {&e}, 1, [](plan::Step& s) { set_int(s, "k", 1); });
  EXPECT_EQ(fv(eye[0]), (std::vector<float>{0, 1, 0, 0, 0, 1}));
  const Tensor shape = ints({2, 2});
  const auto c = run("ConstantOfShape", {&shape});
  EXPECT_EQ(c[0].dtype(), DType::kFloat32);
  EXPECT_EQ(fv(c[0]), (std::vector<float>(4, 0.0f)));
}

TEST(CpuTensorOps, TransposeConcatSplit) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(fv(run("Transpose", {&x})[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  const Tensor y = iota({2, 1});
  const auto c = run("Concat", {&x, &y}, 1, [](plan::Step& s) { set_int(s, "axis", -1); });
  EXPECT_EQ(c[0].shape(), (Shape{2, 4}));
  EXPECT_EQ(fv(c[0]), (std::vector<float>{0, 1, 2, 0, 3, 4, 5, 1}));
  EXPECT_EQ(run("Concat", {&x, &y}, 1, {}, 1)[0].shape(), (Shape{2, 4}));  // opset 1: axis 1
  auto axis1 = [](plan::Step& s) {
    set_int(s, "axis", 1);
    set_ints(s, "split", {1, 2});
  };
  const auto old = run("Split", {&x}, 2, axis1, 11);
  EXPECT_EQ(fv(old[0]), (std::vector<float>{0, 3}));
  EXPECT_EQ(fv(old[1]), (std::vector<float>{1, 2, 4, 5}));
  const Tensor parts = ints({2, 1});
  const auto now = run("Split", {&x, &parts}, 2, [](plan::Step& s) { set_int(s, "axis", 1); });
  EXPECT_EQ(fv(now[0]), (std::vector<float>{0, 1, 3, 4}));
  const auto even = run("Split", {&x}, 3, [](plan::Step& s) { set_int(s, "axis", 1); });
  EXPECT_EQ(fv(even[2]), (std::vector<float>{2, 5}));
}

TEST(CpuTensorOps, TransposeMatchesTheIndexFormulaForEveryPermutation) {
  const Shape dims{3, 40, 5, 36};  // large enough for tiles and threads
  const Tensor x = iota(dims);
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    const auto y = run("Transpose", {&x}, 1, [&](plan::Step& s) { set_ints(s, "perm", perm); });
    const Shape in_strides{40 * 5 * 36, 5 * 36, 36, 1};
    int64_t k = 0;
    bool ok = true;
    for (int64_t a = 0; a < dims[perm[0]]; ++a) {
      for (int64_t b = 0; b < dims[perm[1]]; ++b) {
        for (int64_t c = 0; c < dims[perm[2]]; ++c) {
          for (int64_t d = 0; d < dims[perm[3]]; ++d, ++k) {
            const int64_t src = a * in_strides[perm[0]] + b * in_strides[perm[1]] +
                                c * in_strides[perm[2]] + d * in_strides[perm[3]];
            ok = ok && y[0].data<float>()[k] == static_cast<float>(src);
          }
        }
      }
    }
    EXPECT_TRUE(ok) << perm[0] << perm[1] << perm[2] << perm[3];
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(CpuTensorOps, SliceClampsAndStepsBackwards) {
  const Tensor x = iota({3, 5});
  const Tensor starts = ints({-1, 100}), ends = ints({-100, 0}), axes = ints({1, 0}),
               steps = ints({-2, -1});
  const auto y = run("Slice", {&x, &starts, &ends, &axes, &steps});
  // Axis 0: from row 2 (clamped) down to row 1; axis 1: columns 4, 2, 0.
  EXPECT_EQ(y[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(fv(y[0]), (std::vector<float>{14, 12, 10, 9, 7, 5}));
  auto attrs = [](plan::Step& s) {
    set_ints(s, "starts", {1});
    set_ints(s, "ends", {1000});
    set_ints(s, "axes", {1});
  };
  EXPECT_EQ(run("Slice", {&x}, 1, attrs, 9)[0].shape(), (Shape{3, 4}));
  const Tensor s1 = ints({0}), e1 = ints({INT64_MAX}), a1 = ints({1}), st1 = ints({INT64_MAX / 2});
  EXPECT_EQ(fv(run("Slice", {&x, &s1, &e1, &a1, &st1})[0]), (std::vector<float>{0, 5, 10}));
  const Tensor s2 = ints({3}), e2 = ints({1});
  EXPECT_EQ(run("Slice", {&x, &s2, &e2})[0].shape(), (Shape{0, 5}));
}

TEST(CpuTensorOps, ExpandTileAndPadModes) {
  const Tensor x = make<float>({2, 1}, {1, 2});
  const Tensor shape = ints({2, 1, 3});
  const auto e = run("Expand", {&x, &shape});
  EXPECT_EQ(e[0].shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(fv(e[0]), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
  const Tensor r = make<float>({1, 2}, {1, 2});
  const Tensor reps = ints({2, 2});
  EXPECT_EQ(fv(run("Tile", {&r, &reps})[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  const Tensor p = make<float>({1, 3}, {1, 2, 3});
  const Tensor pads = ints({0, 2, 0, 1});
  auto mode = [](const char* m) { return [m](plan::Step& s) { set_string(s, "mode", m); }; };
  EXPECT_EQ(fv(run("Pad", {&p, &pads}, 1, mode("reflect"))[0]),
            (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(fv(run("Pad", {&p, &pads}, 1, mode("edge"))[0]),
            (std::vector<float>{1, 1, 1, 2, 3, 3}));
  const Tensor value = make<float>({}, {9});
  EXPECT_EQ(fv(run("Pad", {&p, &pads, &value})[0]), (std::vector<float>{9, 9, 1, 2, 3, 9}));
  const Tensor crop = ints({0, -1, 0, 1});
  EXPECT_EQ(fv(run("Pad", {&p, &crop})[0]), (std::vector<float>{2, 3, 0}));
  try {
    run("Pad", {&p, &pads}, 1, mode("xyz"));
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("attribute 'mode' value 'xyz' is not supported"),
              std::string::npos);
  }
}

TEST(CpuTensorOps, LargeReflectPadMatchesTheIndexFormula) {
  const Tensor x = iota({300, 200});
  const Tensor pads = ints({2, 1, 3, 2});
  const auto y =
      run("Pad", {&x, &pads}, 1, [](plan::Step& s) { set_string(s, "mode", "reflect"); });
  ASSERT_EQ(y[0].shape(), (Shape{305, 203}));
  auto reflect = [](int64_t i, int64_t n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
  for (int64_t r = 0; r < 305; r += 7) {
    for (int64_t c = 0; c < 203; c += 5) {
      const float want = static_cast<float>(reflect(r - 2, 300) * 200 + reflect(c - 1, 200));
      ASSERT_EQ(y[0].data<float>()[r * 203 + c], want) << r << "," << c;
    }
  }
}

TEST(CpuTensorOps, GatherFamilies) {
  const Tensor x = iota({3, 2});
  const Tensor idx = make<int64_t>({2, 2}, {2, -3, 1, 1});
  const auto g = run("Gather", {&x, &idx});
  EXPECT_EQ(g[0].shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(fv(g[0]), (std::vector<float>{4, 5, 0, 1, 2, 3, 2, 3}));
  const Tensor oob = ints({3});
  EXPECT_THROW(run("Gather", {&x, &oob}), Error);
  const Tensor ei = make<int32_t>({2, 2}, {1, 0, -1, 1});
  const auto ge = run("GatherElements", {&x, &ei}, 1, [](plan::Step& s) { set_int(s, "axis", 1); });
  EXPECT_EQ(fv(ge[0]), (std::vector<float>{1, 0, 3, 3}));
  const Tensor d = iota({2, 2, 2});
  const Tensor nd = make<int64_t>({2, 1}, {1, 0});
  const auto gnd =
      run("GatherND", {&d, &nd}, 1, [](plan::Step& s) { set_int(s, "batch_dims", 1); });
  EXPECT_EQ(gnd[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(fv(gnd[0]), (std::vector<float>{2, 3, 4, 5}));
}

TEST(CpuTensorOps, ScatterWithReductions) {
  const Tensor x = make<float>({1, 4}, {1, 1, 1, 1});
  const Tensor idx = make<int64_t>({1, 3}, {1, 1, -1});
  const Tensor upd = make<float>({1, 3}, {2, 3, 5});
  auto add = [](plan::Step& s) {
    set_int(s, "axis", 1);
    set_string(s, "reduction", "add");
  };
  EXPECT_EQ(fv(run("ScatterElements", {&x, &idx, &upd}, 1, add)[0]),
            (std::vector<float>{1, 6, 1, 6}));
  const Tensor nd_idx = make<int64_t>({2, 2}, {0, 0, 0, 3});
  const Tensor nd_upd = make<float>({2}, {4, 7});
  const auto mul = run("ScatterND", {&x, &nd_idx, &nd_upd}, 1,
                       [](plan::Step& s) { set_string(s, "reduction", "mul"); });
  EXPECT_EQ(fv(mul[0]), (std::vector<float>{4, 1, 1, 7}));
  EXPECT_THROW(run("ScatterND", {&x, &nd_idx, &nd_upd}, 1,
                   [](plan::Step& s) { set_string(s, "reduction", "avg"); }),
               Error);
}

TEST(CpuTensorOps, OneHotCompressNonZero) {
  const Tensor idx = make<int64_t>({2}, {1, -1});
  const Tensor depth = make<float>({}, {3});
  const Tensor vals = make<int32_t>({2}, {0, 5});
  const auto oh =
      run("OneHot", {&idx, &depth, &vals}, 1, [](plan::Step& s) { set_int(s, "axis", 0); });
  EXPECT_EQ(oh[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values<int32_t>(oh[0]), (std::vector<int32_t>{0, 0, 5, 0, 0, 5}));
  const Tensor x = iota({2, 3});
  const Tensor cond = make<bool>({2}, {false, true});
  const auto c = run("Compress", {&x, &cond}, 1, [](plan::Step& s) { set_int(s, "axis", 1); });
  EXPECT_EQ(fv(c[0]), (std::vector<float>{1, 4}));
  EXPECT_EQ(fv(run("Compress", {&x, &cond})[0]), (std::vector<float>{1}));
  const Tensor nz = make<int32_t>({2, 2}, {0, 3, 4, 0});
  EXPECT_EQ(values<int64_t>(run("NonZero", {&nz})[0]), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(CpuTensorOps, TopKOrdersAndBreaksTiesByIndex) {
  const Tensor x = make<float>({2, 4}, {3, 1, 3, 2, 0, 5, 4, 4});
  const Tensor k = ints({2});
  const auto top = run("TopK", {&x, &k}, 2);
  EXPECT_EQ(fv(top[0]), (std::vector<float>{3, 3, 5, 4}));
  EXPECT_EQ(values<int64_t>(top[1]), (std::vector<int64_t>{0, 2, 1, 2}));
  const auto low = run("TopK", {&x, &k}, 2, [](plan::Step& s) { set_int(s, "largest", 0); });
  EXPECT_EQ(fv(low[0]), (std::vector<float>{1, 2, 0, 4}));
}

// torch.topk of [1, nan, 0, inf, nan, -inf]: largest [nan, nan, inf, 1, 0, -inf] at [1, 4, 3,
// 0, 2, 5]; smallest [-inf, 0, 1, inf, nan, nan] (PyTorch leaves the NaNs' order open; here
// ties, NaNs included, keep the lower index first).
TEST(CpuTensorOps, TopKPutsNaNAboveEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = make<float>({6}, {1, nan, 0, inf, nan, -inf});
  const Tensor k = ints({6});
  const auto top = run("TopK", {&x, &k}, 2);
  EXPECT_EQ(values<int64_t>(top[1]), (std::vector<int64_t>{1, 4, 3, 0, 2, 5}));
  const auto low = run("TopK", {&x, &k}, 2, [](plan::Step& s) { set_int(s, "largest", 0); });
  EXPECT_EQ(values<int64_t>(low[1]), (std::vector<int64_t>{5, 2, 0, 3, 1, 4}));
  const std::vector<float> v = fv(low[0]);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{-inf, 0, 1, inf}));
  EXPECT_TRUE(std::isnan(v[4]) && std::isnan(v[5]));
}

TEST(CpuTensorOps, UniqueElementsAndSlices) {
  const Tensor x = make<int64_t>({6}, {2, 1, 2, 3, 1, 2});
  const auto u = run("Unique", {&x}, 4, [](plan::Step& s) { set_int(s, "sorted", 0); });
  EXPECT_EQ(values<int64_t>(u[0]), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(values<int64_t>(u[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(values<int64_t>(u[2]), (std::vector<int64_t>{0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(values<int64_t>(u[3]), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(values<int64_t>(run("Unique", {&x}, 1)[0]), (std::vector<int64_t>{1, 2, 3}));
  // Columns of [[1, 0, 1], [2, 5, 2]]: column 1 sorts first, columns 0 and 2 are equal.
  const Tensor m = make<float>({2, 3}, {1, 0, 1, 2, 5, 2});
  const auto c = run("Unique", {&m}, 4, [](plan::Step& s) { set_int(s, "axis", 1); });
  EXPECT_EQ(c[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(fv(c[0]), (std::vector<float>{0, 1, 5, 2}));
  EXPECT_EQ(values<int64_t>(c[2]), (std::vector<int64_t>{1, 0, 1}));
}

TEST(CpuTensorOps, CumSumExclusiveReverse) {
  const Tensor x = make<int32_t>({4}, {1, 2, 3, 4});
  const Tensor axis = make<int32_t>({}, {0});
  EXPECT_EQ(values<int32_t>(run("CumSum", {&x, &axis})[0]), (std::vector<int32_t>{1, 3, 6, 10}));
  auto both = [](plan::Step& s) {
    set_int(s, "exclusive", 1);
    set_int(s, "reverse", 1);
  };
  EXPECT_EQ(values<int32_t>(run("CumSum", {&x, &axis}, 1, both)[0]),
            (std::vector<int32_t>{9, 7, 4, 0}));
}

// DepthToSpace in both modes and SpaceToDepth, on 1 x 1 and 2 x 3 images.
TEST(CpuTensorOps, DepthToSpaceModesAndSpaceToDepthInverse) {
  const Tensor x = iota({1, 4, 1, 1});
  auto mode = [](const char* m) {
    return [m](plan::Step& s) {
      set_int(s, "blocksize", 2);
      set_string(s, "mode", m);
    };
  };
  EXPECT_EQ(fv(run("DepthToSpace", {&x}, 1, mode("DCR"))[0]), (std::vector<float>{0, 1, 2, 3}));
  const Tensor y = iota({1, 8, 1, 1});
  // DCR: output channel c, offset (i, j) reads input channel (i * 2 + j) * 2 + c.
  EXPECT_EQ(fv(run("DepthToSpace", {&y}, 1, mode("DCR"))[0]),
            (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  // CRD: reads input channel c * 4 + i * 2 + j.
  EXPECT_EQ(fv(run("DepthToSpace", {&y}, 1, mode("CRD"))[0]),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  const auto space = run("DepthToSpace", {&y}, 1, mode("DCR"));
  const auto back =
      run("SpaceToDepth", {&space[0]}, 1, [](plan::Step& s) { set_int(s, "blocksize", 2); });
  EXPECT_EQ(fv(back[0]), fv(y));
  // With a 2 x 3 image, against ONNX's definition element by element: output (c, h * 2 + i,
  // w * 2 + j) reads input channel (i * 2 + j) * 2 + c (DCR) or c * 4 + i * 2 + j (CRD) at
  // (h, w); SpaceToDepth undoes DCR.
  const Tensor z = iota({1, 8, 2, 3});
  for (const char* m : {"DCR", "CRD"}) {
    std::vector<float> want(48);
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t w = 0; w < 3; ++w) {
          for (int64_t i = 0; i < 2; ++i) {
            for (int64_t j = 0; j < 2; ++j) {
              const int64_t from =
                  std::string(m) == "DCR" ? (i * 2 + j) * 2 + c : c * 4 + i * 2 + j;
              want[static_cast<size_t>((c * 4 + h * 2 + i) * 6 + w * 2 + j)] =
                  static_cast<float>((from * 2 + h) * 3 + w);
            }
          }
        }
      }
    }
    const auto image = run("DepthToSpace", {&z}, 1, mode(m));
    EXPECT_EQ(image[0].shape(), (std::vector<int64_t>{1, 2, 4, 6})) << m;
    EXPECT_EQ(fv(image[0]), want) << m;
  }
  const auto image = run("DepthToSpace", {&z}, 1, mode("DCR"));
  const auto depth =
      run("SpaceToDepth", {&image[0]}, 1, [](plan::Step& s) { set_int(s, "blocksize", 2); });
  EXPECT_EQ(fv(depth[0]), fv(z));
}

TEST(CpuTensorOps, TriluAndReverseSequence) {
  const Tensor x = make<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(fv(run("Trilu", {&x})[0]), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  const Tensor k = make<int64_t>({}, {-1});
  const auto lower = run("Trilu", {&x, &k}, 1, [](plan::Step& s) { set_int(s, "upper", 0); });
  EXPECT_EQ(fv(lower[0]), (std::vector<float>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  const Tensor seq = iota({3, 2});  // [time, batch]
  const Tensor lens = ints({3, 1});
  EXPECT_EQ(fv(run("ReverseSequence", {&seq, &lens})[0]), (std::vector<float>{4, 1, 2, 3, 0, 5}));
}

TEST(CpuTensorOps, EinsumCommonForms) {
  const Tensor a = iota({2, 2, 3});
  const Tensor b = iota({2, 3, 2});
  auto eq = [](const char* e) { return [e](plan::Step& s) { set_string(s, "equation", e); }; };
  const auto mm = run("Einsum", {&a, &b}, 1, eq("bij,bjk->bik"));
  EXPECT_EQ(mm[0].shape(), (Shape{2, 2, 2}));
  // Batch 0: [[0,1,2],[3,4,5]] x [[0,1],[2,3],[4,5]].
  EXPECT_EQ(fv(mm[0])[0], 10);
  EXPECT_EQ(fv(mm[0])[3], 3 * 1 + 4 * 3 + 5 * 5);
  const Tensor m = iota({2, 3});
  EXPECT_EQ(fv(run("Einsum", {&m}, 1, eq("ij->ji"))[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(fv(run("Einsum", {&m}, 1, eq("ij"))[0]), fv(m));  // implicit output keeps i, j
  EXPECT_EQ(fv(run("Einsum", {&m}, 1, eq("ij->i"))[0]), (std::vector<float>{3, 12}));
  const Tensor sq = iota({2, 2});
  EXPECT_EQ(fv(run("Einsum", {&sq}, 1, eq("ii"))[0]), (std::vector<float>{3}));  // trace
  const Tensor u = make<float>({2}, {1, 2}), v = make<float>({3}, {1, 10, 100});
  EXPECT_EQ(fv(run("Einsum", {&u, &v}, 1, eq("i,j->ij"))[0]),
            (std::vector<float>{1, 10, 100, 2, 20, 200}));
  EXPECT_EQ(fv(run("Einsum", {&a}, 1, eq("...ij->...ji"))[0])[1], 3);
}

// Float contractions take the BLAS path, integer ones the index loops: they must agree.
TEST(CpuTensorOps, EinsumGemmPathAgreesWithTheLoops) {
  struct Case {
    const char* eq;
    Shape a, b;
  };
  const std::vector<Case> cases = {{"bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5}},
                                   {"ik,kj->ji", {3, 4}, {4, 5}},
                                   {"ij,jk", {2, 3}, {3, 4}},
                                   {"ij,ij->", {3, 4}, {3, 4}},
                                   {"abc,cd->dba", {2, 3, 4}, {4, 2}},
                                   {"...ij,...jk->...ik", {2, 2, 3}, {2, 3, 2}}};
  for (const auto& c : cases) {
    const Tensor fa = iota(c.a), fb = iota(c.b);
    Tensor ia(DType::kInt64, c.a), ib(DType::kInt64, c.b);
    for (int64_t i = 0; i < ia.numel(); ++i) ia.data<int64_t>()[i] = i;
    for (int64_t i = 0; i < ib.numel(); ++i) ib.data<int64_t>()[i] = i;
    auto eq = [&](plan::Step& s) { set_string(s, "equation", c.eq); };
    const auto f = run("Einsum", {&fa, &fb}, 1, eq);
    const auto n = run("Einsum", {&ia, &ib}, 1, eq);
    ASSERT_EQ(f[0].shape(), n[0].shape()) << c.eq;
    for (int64_t i = 0; i < f[0].numel(); ++i) {
      ASSERT_EQ(f[0].data<float>()[i], static_cast<float>(n[0].data<int64_t>()[i]))
          << c.eq << " " << i;
    }
  }
}

TEST(CpuTensorOps, StringTensorsMoveThroughLayoutOps) {
  Tensor s(DType::kString, {2, 2});
  s.strings() = {"a", "b", "c", "d"};
  const auto t = run("Transpose", {&s});
  EXPECT_EQ(t[0].strings(), (std::vector<std::string>{"a", "c", "b", "d"}));
  const Tensor idx = ints({1});
  EXPECT_EQ(run("Gather", {&s, &idx})[0].strings(), (std::vector<std::string>{"c", "d"}));
}

}  // namespace
}  // namespace ampc::rt::cpu
