// dnnl_ceiling: how much faster oneDNN's bf16 GEMMs and convolutions are than its fp32 ones on
// a model's own shapes, the library ampc's CPU backend calls, with nothing else timed. A
// benchmark: prints, checks nothing.
//
//   dnnl_ceiling [--reps 9] [--warmup 8] [problems.json]   (standard input without a file)
//
// problems.json (scripts/library_ceiling.py writes it from an ONNX graph):
//   {"problems": [{"kind": "matmul", "batch": B, "m": M, "k": K, "n": N},
//                 {"kind": "conv", "n": N, "c": C, "m": M, "group": G, "image": [H, W],
//                  "kernel": [KH, KW], "stride": [..], "dilation": [..], "pad_l": [..],
//                  "pad_r": [..]}, ...]}
//
// Each problem runs its forward and both backward passes (a MatMul's dA = dC B^T and
// dB = A^T dC in the plain row-major layouts a framework holds; a convolution's backward data
// and backward weights, every operand in the layout oneDNN prefers, reordered before timing),
// once in fp32 and once in bf16 (bf16 operands and results, fp32 accumulation). The two
// precisions take turns, one run of each per repetition, so a slow spell of the shared
// machine falls on both; each pass's time is its fastest repetition (this host's speed jumps
// between levels for seconds at a time, and a ceiling is what the library reaches when
// nothing slows it). Prints {"fp32_ms": .., "bf16_ms": .., "problems": .., "by_pass":
// {"forward" | "input_gradient" | "weight_gradient": {"fp32_ms": .., "bf16_ms": ..}}}: sums
// over the problems.
// Threads: oneDNN's OpenMP pool (OMP_NUM_THREADS).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <oneapi/dnnl/dnnl.hpp>

#include "base/half.h"

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;
using json = nlohmann::json;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

// A buffer of `md`, filled with small values (no subnormals, no overflow in any sum).
memory filled(const memory::desc& md) {
  memory m(md, engine());
  const size_t bytes = md.get_size();
  const auto value = [](size_t i) { return 0.01f * static_cast<float>(i % 7 + 1); };
  if (md.data_type() == dt::bf16) {
    auto* p = static_cast<ampc::BFloat16*>(m.get_data_handle());
    for (size_t i = 0; i < bytes / 2; ++i) p[i] = ampc::float_to_bf16(value(i));
  } else {
    auto* p = static_cast<float*>(m.get_data_handle());
    for (size_t i = 0; i < bytes / 4; ++i) p[i] = value(i);
  }
  return m;
}

// One pass of a problem in one precision: a primitive and its arguments.
struct Pass {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  void run() { prim.execute(stream(), args); }
};

// The three passes of one problem in one precision (forward, input gradient, weight gradient),
// run back to back.
constexpr int kPasses = 3;
const char* const kPassNames[kPasses] = {"forward", "input_gradient", "weight_gradient"};

struct Passes {
  std::vector<Pass> passes;
  // Each pass's time in ms.
  std::vector<double> run_ms() {
    std::vector<double> ms;
    for (Pass& p : passes) {
      const auto start = std::chrono::steady_clock::now();
      p.run();
      stream().wait();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    return ms;
  }
};

// C[b] = A[b] B[b], A [M,K], B [K,N], C [M,N], row-major; `a_t` / `b_t`: the operand is held
// transposed (A as [K,M], B as [N,K]).
Pass matmul(dt type, int64_t batch, int64_t m, int64_t k, int64_t n, bool a_t, bool b_t) {
  const auto desc = [&](int64_t rows, int64_t cols, bool transposed) {
    memory::dims d = {batch, rows, cols};
    memory::dims s =
        transposed ? memory::dims{rows * cols, 1, rows} : memory::dims{rows * cols, cols, 1};
    return memory::desc(d, type, s);
  };
  const memory::desc a = desc(m, k, a_t), b = desc(k, n, b_t), c = desc(m, n, false);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
  return {dnnl::matmul(pd),
          {{DNNL_ARG_SRC, filled(a)}, {DNNL_ARG_WEIGHTS, filled(b)}, {DNNL_ARG_DST, filled(c)}}};
}

// Forward C = A B, then dA = dC B^T and dB = A^T dC on the same buffers' shapes.
Passes matmul_problem(dt type, const json& p) {
  const int64_t batch = p.at("batch"), m = p.at("m"), k = p.at("k"), n = p.at("n");
  Passes ps;
  ps.passes.push_back(matmul(type, batch, m, k, n, false, false));
  ps.passes.push_back(matmul(type, batch, m, n, k, false, true));  // dA [M,K] = dC B^T
  ps.passes.push_back(matmul(type, batch, k, m, n, true, false));  // dB [K,N] = A^T dC
  return ps;
}

memory::dims dims_of(const json& v) {
  memory::dims d;
  for (const auto& x : v) d.push_back(x.get<int64_t>());
  return d;
}

// The three passes of a convolution, each operand in the primitive's preferred layout.
Passes conv_problem(dt type, const json& p) {
  const int64_t n = p.at("n"), c = p.at("c"), m = p.at("m"), g = p.at("group");
  const memory::dims image = dims_of(p.at("image")), kernel = dims_of(p.at("kernel"));
  const memory::dims stride = dims_of(p.at("stride")), dilation = dims_of(p.at("dilation"));
  const memory::dims pad_l = dims_of(p.at("pad_l")), pad_r = dims_of(p.at("pad_r"));
  memory::dims xd = {n, c}, yd = {n, m}, wd, dil;
  if (g > 1) {
    wd = {g, m / g, c / g};
  } else {
    wd = {m, c};
  }
  for (size_t i = 0; i < image.size(); ++i) {
    const int64_t extent = (kernel[i] - 1) * dilation[i] + 1;
    xd.push_back(image[i]);
    yd.push_back((image[i] + pad_l[i] + pad_r[i] - extent) / stride[i] + 1);
    wd.push_back(kernel[i]);
    dil.push_back(dilation[i] - 1);  // oneDNN counts the taps skipped
  }
  const memory::desc x(xd, type, tag::any), y(yd, type, tag::any), w(wd, type, tag::any);
  using fwd = dnnl::convolution_forward;
  using bwd_d = dnnl::convolution_backward_data;
  using bwd_w = dnnl::convolution_backward_weights;
  const auto alg = dnnl::algorithm::convolution_direct;
  const fwd::primitive_desc f(
      fwd::desc(dnnl::prop_kind::forward_training, alg, x, w, y, stride, dil, pad_l, pad_r),
      engine());
  const bwd_d::primitive_desc bd(bwd_d::desc(alg, x, w, y, stride, dil, pad_l, pad_r), engine(), f);
  const bwd_w::primitive_desc bw(bwd_w::desc(alg, x, w, y, stride, dil, pad_l, pad_r), engine(), f);
  Passes ps;
  ps.passes.push_back({fwd(f),
                       {{DNNL_ARG_SRC, filled(f.src_desc())},
                        {DNNL_ARG_WEIGHTS, filled(f.weights_desc())},
                        {DNNL_ARG_DST, filled(f.dst_desc())}}});
  ps.passes.push_back({bwd_d(bd),
                       {{DNNL_ARG_DIFF_DST, filled(bd.diff_dst_desc())},
                        {DNNL_ARG_WEIGHTS, filled(bd.weights_desc())},
                        {DNNL_ARG_DIFF_SRC, filled(bd.diff_src_desc())}}});
  ps.passes.push_back({bwd_w(bw),
                       {{DNNL_ARG_SRC, filled(bw.src_desc())},
                        {DNNL_ARG_DIFF_DST, filled(bw.diff_dst_desc())},
                        {DNNL_ARG_DIFF_WEIGHTS, filled(bw.diff_weights_desc())}}});
  return ps;
}

Passes problem(dt type, const json& p) {
  const std::string kind = p.at("kind");
  if (kind == "matmul") return matmul_problem(type, p);
  if (kind == "conv") return conv_problem(type, p);
  throw std::runtime_error("unknown problem kind '" + kind + "'");
}

// Each pass's fastest of `reps` runs in each precision (ms32, ms16: kPasses each), the two
// precisions taking turns after `warmup` runs each.
void fastest_pair(Passes& fp32, Passes& bf16, int warmup, int reps, std::vector<double>& ms32,
                  std::vector<double>& ms16) {
  for (int i = 0; i < warmup; ++i) {
    fp32.run_ms();
    bf16.run_ms();
  }
  ms32.assign(kPasses, std::numeric_limits<double>::infinity());
  ms16 = ms32;
  for (int i = 0; i < reps; ++i) {
    const std::vector<double> t32 = fp32.run_ms(), t16 = bf16.run_ms();
    for (int k = 0; k < kPasses; ++k) {
      ms32[k] = std::min(ms32[k], t32[k]);
      ms16[k] = std::min(ms16[k], t16[k]);
    }
  }
}

int run(int argc, char** argv) {
  int reps = 9, warmup = 8;
  std::string path;  // the problems' file; standard input where none is given
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--reps" || a == "--warmup") && i + 1 < argc) {
      (a == "--reps" ? reps : warmup) = std::atoi(argv[++i]);
    } else if (path.empty() && !a.empty() && a[0] != '-') {
      path = a;
    } else {
      std::fprintf(stderr, "usage: dnnl_ceiling [--reps N] [--warmup N] [problems.json]\n");
      return 2;
    }
  }
  if (reps < 1 || warmup < 0) {
    std::fprintf(stderr, "dnnl_ceiling: --reps must be at least 1, --warmup at least 0\n");
    return 2;
  }
  json in;
  if (path.empty()) {
    in = json::parse(std::cin);
  } else {
    std::ifstream file(path);
    if (!file) throw std::runtime_error("cannot read " + path);
    in = json::parse(file);
  }
  std::vector<double> total32(kPasses, 0.0), total16(kPasses, 0.0);
  int count = 0;
  for (const json& p : in.at("problems")) {
    Passes fp32 = problem(dt::f32, p), bf16 = problem(dt::bf16, p);
    std::vector<double> ms32, ms16;
    fastest_pair(fp32, bf16, warmup, reps, ms32, ms16);
    for (int k = 0; k < kPasses; ++k) {
      total32[k] += ms32[k];
      total16[k] += ms16[k];
    }
    ++count;
  }
  json by_pass = json::object();
  for (int k = 0; k < kPasses; ++k) {
    by_pass[kPassNames[k]] = {{"fp32_ms", total32[k]}, {"bf16_ms", total16[k]}};
  }
  const json out = {{"fp32_ms", std::accumulate(total32.begin(), total32.end(), 0.0)},
                    {"bf16_ms", std::accumulate(total16.begin(), total16.end(), 0.0)},
                    {"problems", count},
                    {"by_pass", by_pass}};
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dnnl_ceiling: %s\n", e.what());
    return 1;
  }
}
