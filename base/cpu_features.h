// The host CPU's vector extensions that hand-written AVX-512 loops need, each checked once.
// The build targets plain x86-64: such loops carry [[gnu::target(...)]] and run only where
// these say yes (the callers keep a portable path for the rest).
#pragma once

namespace ampc {

inline bool cpu_has_avx512f() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// AVX512F with BW (16-bit lanes: masked 16-bit loads, word conversions) and VL (those at
// 256 and 128 bits): every AVX-512 CPU since Skylake-X.
inline bool cpu_has_avx512_bw_vl() {
  static const bool yes =
      cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return yes;
}

}  // namespace ampc
