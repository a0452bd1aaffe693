#include "runtime/cpu/heap_reuse.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace ampc::rt::cpu {
namespace {

bool user_set_thresholds() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
         (tunables && std::strstr(tunables, "glibc.malloc."));
}

}  // namespace

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    if (user_set_thresholds()) return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
  });
#endif
}

}  // namespace ampc::rt::cpu
