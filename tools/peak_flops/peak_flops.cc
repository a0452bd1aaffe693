// peak_flops: the arithmetic peak of this CPU's cores in fp32 and in bf16, the ceiling of any
// GEMM-bound training step. Each thread runs a loop of independent multiply-add chains that
// never touch memory:
//
//   fp32  VFMADD231PS on 512-bit registers (AVX-512F): 16 lanes x 2 flops per instruction;
//         on 256-bit registers (AVX2 + FMA) where AVX-512 is missing: 8 x 2;
//   bf16  VDPBF16PS on 512-bit registers (AVX512-BF16): 16 fp32 lanes, each adding the
//         products of two bf16 pairs: 64 flops per instruction.
//
// The loops are written in assembly so that exactly these instructions are timed (a compiler
// may keep accumulators in memory or merge chains). 20 chains (12 on 256-bit registers) cover
// each instruction's latency times its issue ports on the CPUs that have it, so the count is
// the ports' throughput. The threads run at once; GFLOP/s is all their flops over the wall
// time, the best of three runs. A benchmark: prints, checks nothing.
//
//   peak_flops [--threads N] [--seconds S] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Kind {
  const char* instruction;
  int chains;          // instructions per loop iteration
  double flops;        // per instruction
  void (*loop)(long);  // runs that many iterations
};

// Tiny positive operands (1e-9 in fp32, 2^-31 in bf16): the sums stay far from overflow and
// from subnormal values. The accumulators start at zero.
const float kFp32Operand = 1e-9f;
const unsigned kBf16Pair = 0x30003000u;  // two bf16 2^-31

// The loop in assembly: `broadcast` puts the operand in the last register, ZERO clears each
// accumulator, then every iteration runs STEP on each of the N accumulators.
#define AMPC_LOOP(broadcast, ZERO, STEP, N) \
  broadcast "\n\t" N(ZERO) "1:\n\t" N(STEP) "dec %0\n\t"  \
            "jnz 1b"
#define AMPC_ZMM_ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define AMPC_FMA_ZMM(r) "vfmadd231ps %%zmm31, %%zmm31, %%zmm" #r "\n\t"
#define AMPC_DP_ZMM(r) "vdpbf16ps %%zmm31, %%zmm31, %%zmm" #r "\n\t"
#define AMPC_YMM_ZERO(r) "vpxor %%ymm" #r ", %%ymm" #r ", %%ymm" #r "\n\t"
#define AMPC_FMA_YMM(r) "vfmadd231ps %%ymm15, %%ymm15, %%ymm" #r "\n\t"
// clang-format off
#define AMPC_20(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) \
                   M(10) M(11) M(12) M(13) M(14) M(15) M(16) M(17) M(18) M(19)
#define AMPC_12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define AMPC_ZMM_CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
    "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", \
    "xmm18", "xmm19", "xmm31", "cc"
#define AMPC_YMM_CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
    "xmm8", "xmm9", "xmm10", "xmm11", "xmm15", "cc"
// clang-format on

__attribute__((target("avx512f"))) void fma_zmm(long iterations) {
  asm volatile(AMPC_LOOP("vbroadcastss %1, %%zmm31", AMPC_ZMM_ZERO, AMPC_FMA_ZMM, AMPC_20)
               : "+r"(iterations)
               : "m"(kFp32Operand)
               : AMPC_ZMM_CLOBBERS);
}

__attribute__((target("avx512f,avx512bf16"))) void dpbf16_zmm(long iterations) {
  asm volatile(AMPC_LOOP("vpbroadcastd %1, %%zmm31", AMPC_ZMM_ZERO, AMPC_DP_ZMM, AMPC_20)
               : "+r"(iterations)
               : "m"(kBf16Pair)
               : AMPC_ZMM_CLOBBERS);
}

__attribute__((target("avx2,fma"))) void fma_ymm(long iterations) {
  asm volatile(AMPC_LOOP("vbroadcastss %1, %%ymm15", AMPC_YMM_ZERO, AMPC_FMA_YMM, AMPC_12)
               : "+r"(iterations)
               : "m"(kFp32Operand)
               : AMPC_YMM_CLOBBERS);
}

const Kind kFmaZmm{"VFMADD231PS zmm", 20, 32.0, fma_zmm};
const Kind kFmaYmm{"VFMADD231PS ymm", 12, 16.0, fma_ymm};
const Kind kDpbf16Zmm{"VDPBF16PS zmm", 20, 64.0, dpbf16_zmm};

// Wall seconds of `threads` threads each running `iterations` iterations at once.
double wall_seconds(const Kind& k, int threads, long iterations) {
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back(k.loop, iterations);
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// GFLOP/s of `threads` threads, the best of three runs of about `seconds` each.
double peak_gflops(const Kind& k, int threads, double seconds) {
  long iterations = 1 << 16;
  while (wall_seconds(k, 1, iterations) < seconds / 8) iterations *= 2;
  const long timed =
      std::max(1L, static_cast<long>(iterations * (seconds / wall_seconds(k, 1, iterations))));
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const double flops = static_cast<double>(threads) * timed * k.chains * k.flops;
    best = std::max(best, flops / wall_seconds(k, threads, timed) / 1e9);
  }
  return best;
}

int usage() {
  std::fprintf(stderr, "usage: peak_flops [--threads N] [--seconds S] [--json]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  double seconds = 0.3;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      return usage();
    }
  }
  if (threads < 1 || !(seconds > 0)) return usage();
  __builtin_cpu_init();
  const bool zmm = __builtin_cpu_supports("avx512f");
  const bool ymm = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool bf16 = zmm && __builtin_cpu_supports("avx512bf16");
  const Kind* fp32_kind = zmm ? &kFmaZmm : ymm ? &kFmaYmm : nullptr;
  const double fp32 = fp32_kind ? peak_gflops(*fp32_kind, threads, seconds) : 0.0;
  const double bf = bf16 ? peak_gflops(kDpbf16Zmm, threads, seconds) : 0.0;
  if (json) {
    std::printf(
        "{\"threads\": %d, \"fp32_gflops\": %.1f, \"fp32_instruction\": \"%s\", "
        "\"bf16_gflops\": %.1f, \"bf16_instruction\": \"%s\"}\n",
        threads, fp32, fp32_kind ? fp32_kind->instruction : "none", bf,
        bf16 ? kDpbf16Zmm.instruction : "none");
    return 0;
  }
  std::printf("arithmetic peak, %d thread(s) at once\n", threads);
  if (fp32_kind) {
    std::printf("  fp32  %8.1f GFLOP/s  (%s)\n", fp32, fp32_kind->instruction);
  } else {
    std::printf("  fp32  not measured: the CPU has neither AVX-512F nor AVX2 with FMA\n");
  }
  if (bf16) {
    std::printf("  bf16  %8.1f GFLOP/s  (%s)\n", bf, kDpbf16Zmm.instruction);
    if (fp32 > 0) std::printf("  bf16 / fp32  %.2fx\n", bf / fp32);
  } else {
    std::printf("  bf16  none: the CPU has no AVX512-BF16 (bf16 runs widened to fp32)\n");
  }
  return 0;
}
