// The host CPU's vector extensions that hand-written AVX-512 loops need, each checked once.
// The build targets plain x86-64: such loops carry [[gnu::target(...)]] and run only where
// these say yes (the callers keep a portable path for the rest). AMPC_NO_AVX512 set in the
// environment (to anything but "" or "0") makes them say no, so that the portable paths run on
// an AVX-512 machine too: their tests (tests/CMakeLists.txt runs suites again with it), and a
// comparison when a result is in doubt.
#pragma once

#include <cstdlib>
#include <string_view>

namespace ampc {

inline bool avx512_loops_allowed() {
  static const bool yes = [] {
    const char* v = std::getenv("AMPC_NO_AVX512");
    return v == nullptr || std::string_view(v).empty() || std::string_view(v) == "0";
  }();
  return yes;
}

inline bool cpu_has_avx512f() {
  static const bool yes = avx512_loops_allowed() && __builtin_cpu_supports("avx512f");
  return yes;
}

// AVX512F with BW (16-bit lanes: masked 16-bit loads, word conversions) and VL (those at
// 256 and 128 bits): every AVX-512 CPU since Skylake-X.
inline bool cpu_has_avx512_bw_vl() {
  static const bool yes =
      cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
}

// The same with DQ (64-bit integer multiplies, 64-bit integer <-> double conversions): also
// every AVX-512 CPU since Skylake-X.
inline bool cpu_has_avx512_dq_bw_vl() {
  static const bool yes = cpu_has_avx512_bw_vl() && __builtin_cpu_supports("avx512dq");
  return yes;
}

}  // namespace ampc
