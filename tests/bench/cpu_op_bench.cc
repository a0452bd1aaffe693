// Times CPU operators through the op registry on ResNet-18-sized tensors (batch 32): the
// pooling, BatchNorm and reduction ops of a training step. A benchmark, not a test: prints one
// line per case (median and fastest milliseconds per call over the repetitions).
//
//     build/tests/cpu_op_bench [repetitions]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tests/unit/op_test_helpers.h"

namespace {

using namespace ampc;
using namespace ampc::rt;
using namespace ampc::rt::cpu;
using optest::attr_f;
using optest::attr_i;
using optest::attr_ints;
using Dims = std::vector<int64_t>;

Tensor random(const Dims& shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return optest::make(DType::kFloat32, shape, optest::pseudo_random(static_cast<size_t>(n), seed));
}

Tensor ints(const Dims& v) {
  return optest::make(DType::kInt64, {static_cast<int64_t>(v.size())},
                      std::vector<double>(v.begin(), v.end()));
}

struct Times {
  double median, min;
};

Times time_ms(int reps, const std::function<void()>& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const Tensor x = random({32, 64, 16, 16}, 1);
  const Tensor c64 = random({64}, 2);
  const Tensor var = optest::make(DType::kFloat32, {64}, std::vector<double>(64, 1.5));
  const Tensor big = random({32, 64, 32, 32}, 3);
  const Tensor feat = random({32, 512, 4, 4}, 4);
  const Tensor logits = random({32, 512}, 5);
  const std::vector<plan::Attribute> pool3 = {attr_ints("kernel_shape", {3, 3}),
                                              attr_ints("strides", {2, 2}),
                                              attr_ints("pads", {1, 1, 1, 1})};
  const Tensor pooled = optest::run("MaxPool", {big}, pool3, 1, 12)[0];
  struct Case {
    std::string name;
    std::function<void()> run;
  };
  const std::vector<Case> cases = {
      {"BatchNormalization training [32,64,16,16]",
       [&] {
         optest::run("BatchNormalization", {x, c64, c64, c64, var},
                     {attr_f("momentum", 0.9f), attr_i("training_mode", 1)}, 3, 15);
       }},
      {"BatchNormalization inference [32,64,16,16]",
       [&] {
         optest::run("BatchNormalization", {x, c64, c64, c64, var}, {}, 1, 15);
       }},
      {"ReduceSum axes 0,2,3 [32,64,16,16] (BN backward)",
       [&] {
         optest::run("ReduceSum", {x, ints({0, 2, 3})}, {}, 1, 13);
       }},
      {"ReduceMean axes 0,2,3 keepdims [32,64,16,16]",
       [&] {
         optest::run("ReduceMean", {x, ints({0, 2, 3})}, {}, 1, 18);
       }},
      {"ReduceSum axis 0 [32,64,16,16] (over batch)",
       [&] {
         optest::run("ReduceSum", {x, ints({0})}, {}, 1, 13);
       }},
      {"ReduceSum axis 0 [32,512] (over batch)",
       [&] {
         optest::run("ReduceSum", {logits, ints({0})}, {}, 1, 13);
       }},
      {"ReduceMax axis 1 [32,512]",
       [&] {
         optest::run("ReduceMax", {logits, ints({1})}, {}, 1, 18);
       }},
      {"MaxPool 3x3 s2 p1 [32,64,32,32]", [&] { optest::run("MaxPool", {big}, pool3, 1, 12); }},
      {"MaxPool 3x3 s2 p1 with indices [32,64,32,32]",
       [&] { optest::run("MaxPool", {big}, pool3, 2, 12); }},
      {"MaxPoolGrad 3x3 s2 p1 [32,64,32,32]",
       [&] {
         optest::run("MaxPoolGrad", {pooled, big}, pool3, 1, 1, "ampc");
       }},
      {"AveragePool 3x3 s2 p1 [32,64,32,32]",
       [&] { optest::run("AveragePool", {big}, pool3, 1, 19); }},
      {"AveragePoolGrad 3x3 s2 p1 [32,64,32,32]",
       [&] {
         optest::run("AveragePoolGrad", {pooled, big}, pool3, 1, 1, "ampc");
       }},
      {"GlobalAveragePool [32,512,4,4]",
       [&] { optest::run("GlobalAveragePool", {feat}, {}, 1, 1); }},
      {"GlobalAveragePool [32,64,32,32]",
       [&] { optest::run("GlobalAveragePool", {big}, {}, 1, 1); }},
  };
  std::printf("%-52s %10s %10s\n", "case", "median ms", "min ms");
  for (const Case& c : cases) {
    const Times t = time_ms(reps, c.run);
    std::printf("%-52s %10.3f %10.3f\n", c.name.c_str(), t.median, t.min);
  }
  return 0;
}
