#include "runtime/memory_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/checked_size.h"
#include "base/error.h"

namespace ampc::rt {
namespace {

// A number from a one-line file (cgroup files); nothing for "max", a missing file or junk.
std::optional<int64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size() || v < 0) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return static_cast<int64_t>(kib) * 1024;
  }
  return std::nullopt;
}

// Room under the cgroup's memory limit (v2, then v1), if one is set.
std::optional<AvailableMemory> cgroup_room() {
  const struct {
    const char *limit, *usage, *name;
  } files[] = {{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "cgroup memory.max"},
               {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory/memory.usage_in_bytes", "cgroup memory.limit_in_bytes"}};
  for (const auto& f : files) {
    const auto limit = read_number(f.limit);
    if (!limit || *limit >= (int64_t{1} << 60)) continue;  // v1 writes "no limit" as ~2^63
    const int64_t used = read_number(f.usage).value_or(0);
    return AvailableMemory{std::max<int64_t>(*limit - used, 0), f.name};
  }
  return std::nullopt;
}

}  // namespace

int64_t MemoryNeed::total() const {
  int64_t t = 0;
  for (int64_t b : {arena, state, constants, inputs, workspace})
    t = checked_add_bytes(t, b, "the plan's memory");
  return t;
}

MemoryNeed memory_need(const plan::Plan& plan) {
  const auto& m = plan.memory();
  return {m.arena_bytes(), m.state_bytes(), m.constant_bytes(), m.input_bytes(),
          m.workspace_bytes()};
}

std::optional<AvailableMemory> available_host_memory() {
  std::optional<AvailableMemory> best;
  if (const auto a = mem_available()) best = AvailableMemory{*a, "MemAvailable"};
  if (const auto c = cgroup_room(); c && (!best || c->bytes < best->bytes)) best = c;
  return best;
}

std::string format_bytes(int64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (bytes >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  else if (bytes >= (int64_t{1} << 10))
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / (1 << 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

void check_memory_fits(const MemoryNeed& need, const AvailableMemory& available,
                       const std::string& where, const std::string& model) {
  const int64_t total = need.total();
  if (total <= available.bytes) return;
  // The size to search with, rounded down to a tenth of a GiB (or a KiB below 1 GiB).
  char budget[48];
  if (available.bytes >= (int64_t{1} << 30)) {
    std::snprintf(budget, sizeof budget, "%.1fGiB",
                  std::floor(static_cast<double>(available.bytes) / (1 << 30) * 10) / 10);
  } else {
    std::snprintf(budget, sizeof budget, "%lldKiB",
                  static_cast<long long>(std::max<int64_t>(available.bytes >> 10, 1)));
  }
  throw Error("the plan needs " + format_bytes(total) + " (arena " + format_bytes(need.arena) +
              ", state " + format_bytes(need.state) + ", constants " +
              format_bytes(need.constants) + ", inputs " + format_bytes(need.inputs) +
              ", workspace " + format_bytes(need.workspace) + ") but only " +
              format_bytes(available.bytes) + " is available on " + where + " (" +
              available.source + "); `ampc inspect " + model + " --memory --device-memory " +
              budget + "` finds the largest batch that fits");
}

}  // namespace ampc::rt
