#include "runtime/dist/collectives.h"

#include <atomic>

namespace ampc::rt::dist {
namespace {
std::atomic<Collectives*> g_current{nullptr};
}  // namespace

Collectives* current() {
  return g_current.load();
}
void set_current(Collectives* collectives) {
  g_current.store(collectives);
}
int rank() {
  return current() ? current()->rank() : 0;
}
int world() {
  return current() ? current()->world() : 1;
}

}  // namespace ampc::rt::dist
