#include "lower/memory_plan.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "base/error.h"

namespace ampc::lower {
namespace {

bool is_live(const MemoryBuffer& b) {
  return b.first <= b.last;
}

// Storage shared by a chain of buffers through accepted in-place candidates: each buffer of
// the chain starts where the previous one ends, so the chain's lifetime is one interval.
struct Storage {
  int64_t bytes = 0;  // aligned
  int32_t first = 0;
  int32_t last = -1;
  int32_t head = -1;  // the chain's first buffer
  int32_t tail = -1;  // the chain's last buffer: the only one whose storage can be taken over
};

int32_t find_root(std::vector<int32_t>& parent, int32_t i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

void check_problem(const std::vector<MemoryBuffer>& buffers, int64_t alignment) {
  if (alignment <= 0) throw Error("memory plan: the alignment must be positive");
  for (size_t i = 0; i < buffers.size(); ++i) {
    const MemoryBuffer& b = buffers[i];
    if (b.bytes < 0 || (is_live(b) && b.first < 0))
      throw Error("memory plan: buffer " + std::to_string(i) + " has a negative size or lifetime");
  }
}

// Accepts in-place candidates, buffers in order of their first point (so that chains
// compose), and returns the storage root of each buffer (`parent`, path-compressed).
std::vector<int32_t> share_in_place(const std::vector<MemoryBuffer>& buffers,
                                    std::vector<Storage>& storage,
                                    std::vector<int32_t>& shared_with) {
  const int32_t n = static_cast<int32_t>(buffers.size());
  std::vector<int32_t> parent(n);
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n; ++i) {
    parent[i] = i;
    if (!buffers[i].may_share.empty()) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::pair(buffers[a].first, a) < std::pair(buffers[b].first, b);
  });
  for (int32_t b : order) {
    if (!is_live(buffers[b]) || storage[b].bytes == 0) continue;
    for (int32_t x : buffers[b].may_share) {
      // x must start before b: two buffers that start at the same point are both written
      // there, so neither can take the other's storage.
      if (x < 0 || x >= n || !is_live(buffers[x]) || buffers[x].first >= buffers[b].first) continue;
      const int32_t gx = find_root(parent, x);
      const int32_t gb = find_root(parent, b);
      Storage& sx = storage[gx];
      const Storage& sb = storage[gb];
      if (gx == gb || sx.tail != x || sx.last != buffers[b].first || sb.head != b ||
          sb.bytes > sx.bytes)
        continue;
      parent[gb] = gx;
      sx.last = std::max(sx.last, sb.last);
      sx.tail = sb.tail;
      shared_with[b] = x;
      break;
    }
  }
  for (int32_t i = 0; i < n; ++i) find_root(parent, i);
  return parent;
}

// A placed storage: bytes [lo, hi), lifetime [first, last].
struct Placed {
  int64_t lo;
  int64_t hi;
  int32_t first;
  int32_t last;
};

// A function object rather than a function, so that sorts and searches inline it.
constexpr auto by_offset = [](const Placed& a, const Placed& b) { return a.lo < b.lo; };

bool overlaps(const Placed& p, int32_t first, int32_t last) {
  return (p.first <= last) & (first <= p.last);  // no branch: see plan_memory_offsets
}

void insert_sorted(std::vector<Placed>& v, const Placed& p) {
  v.insert(std::upper_bound(v.begin(), v.end(), p, by_offset), p);
}

// Every placed storage in offset order, in blocks of bounded size: cheap insertion, and a
// scan over contiguous memory.
class OffsetOrder {
 public:
  void insert(const Placed& p) {
    ++size_;
    if (blocks_.empty()) blocks_.emplace_back();
    size_t b = 0;
    while (b + 1 < blocks_.size() && blocks_[b + 1].front().lo <= p.lo) ++b;
    std::vector<Placed>& block = blocks_[b];
    insert_sorted(block, p);
    if (block.size() > 2 * kBlock) {
      std::vector<Placed> upper(block.begin() + kBlock, block.end());
      block.resize(kBlock);
      blocks_.insert(blocks_.begin() + b + 1, std::move(upper));
    }
  }

  size_t size() const { return size_; }

  // Calls visit(p, overlaps) for every placed storage in offset order, overlaps telling
  // whether it overlaps [first, last] in time (a flag rather than a branch: which do is
  // unpredictable, and the caller can ignore the others without one).
  template <typename F>
  void for_each(int32_t first, int32_t last, F&& visit) const {
    for (const auto& block : blocks_) {
      for (const Placed& p : block) visit(p, overlaps(p, first, last));
    }
  }

 private:
  static constexpr size_t kBlock = 256;
  std::vector<std::vector<Placed>> blocks_;
  size_t size_ = 0;
};

// Placed storages by time: one living at most kShortPoints points is in the list (sorted by
// offset) of every block of kBlockPoints points its lifetime touches, longer ones in one
// list. A query of a short lifetime reads the long list and a few short ones.
class TimeBlocks {
 public:
  explicit TimeBlocks(int32_t points) : blocks_(points / kBlockPoints + 1) {}

  void insert(const Placed& p) {
    if (p.last - p.first >= kShortPoints) return insert_sorted(long_, p);
    for (int32_t b = p.first / kBlockPoints; b <= p.last / kBlockPoints; ++b)
      insert_sorted(blocks_[b], p);
  }

  // About what for_each(first, last) costs, in storages read: the long list, and the short
  // lists read and (what overlaps) sorted.
  size_t cost(int32_t first, int32_t last) const {
    size_t near = 0;
    for (int32_t b = first / kBlockPoints; b <= last / kBlockPoints; ++b) near += blocks_[b].size();
    size_t log_near = 1;
    while ((size_t{1} << log_near) < near) ++log_near;
    return long_.size() + near * log_near;
  }

  // Calls visit(p, overlaps) in offset order for every long-lived placed storage and for
  // the short-lived ones that overlap [first, last] (as OffsetOrder::for_each).
  template <typename F>
  void for_each(int32_t first, int32_t last, F&& visit) {
    near_.clear();
    for (int32_t b = first / kBlockPoints; b <= last / kBlockPoints; ++b) {
      for (const Placed& p : blocks_[b]) {
        // Once: from the first block both lifetimes touch.
        if (overlaps(p, first, last) && std::max(first, p.first) / kBlockPoints == b)
          near_.push_back(p);
      }
    }
    std::sort(near_.begin(), near_.end(), by_offset);
    size_t j = 0;
    for (const Placed& p : long_) {
      for (; j < near_.size() && near_[j].lo <= p.lo; ++j) visit(near_[j], true);
      visit(p, overlaps(p, first, last));
    }
    for (; j < near_.size(); ++j) visit(near_[j], true);
  }

 private:
  static constexpr int32_t kBlockPoints = 32;
  static constexpr int32_t kShortPoints = 128;

  std::vector<std::vector<Placed>> blocks_;
  std::vector<Placed> long_;
  std::vector<Placed> near_;
};

// The lower bound: the most aligned bytes live at one point, over the storages (so in-place
// sharing counts once).
void lower_bound(const std::vector<Storage>& storage, const std::vector<int32_t>& items,
                 int32_t points, MemoryPlanResult& result) {
  std::vector<int64_t> delta(points + 1, 0);
  for (int32_t i : items) {
    delta[storage[i].first] += storage[i].bytes;
    delta[storage[i].last + 1] -= storage[i].bytes;
  }
  int64_t live = 0;
  for (int32_t t = 0; t < points; ++t) {
    live += delta[t];
    if (live > result.lower_bound_bytes) {
      result.lower_bound_bytes = live;
      result.peak_point = t;
    }
  }
}

}  // namespace

int64_t align_up(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

MemoryPlanResult plan_memory_offsets(const std::vector<MemoryBuffer>& buffers, int64_t alignment) {
  check_problem(buffers, alignment);
  const int32_t n = static_cast<int32_t>(buffers.size());
  MemoryPlanResult result;
  result.offsets.assign(n, 0);
  result.shared_with.assign(n, -1);

  std::vector<Storage> storage(n);
  int32_t points = 0;
  for (int32_t i = 0; i < n; ++i) {
    const MemoryBuffer& b = buffers[i];
    if (!is_live(b)) continue;
    storage[i] = {align_up(b.bytes, alignment), b.first, b.last, i, i};
    points = std::max(points, b.last + 1);
  }
  const std::vector<int32_t> root = share_in_place(buffers, storage, result.shared_with);

  // The storages to place: roots that are live and take bytes.
  std::vector<int32_t> items;
  for (int32_t i = 0; i < n; ++i) {
    if (root[i] == i && is_live(buffers[i]) && storage[i].bytes > 0) items.push_back(i);
  }
  lower_bound(storage, items, points, result);

  // Greedy by size, best fit. Ties: earlier first point, then lower index (deterministic).
  std::sort(items.begin(), items.end(), [&](int32_t a, int32_t b) {
    if (storage[a].bytes != storage[b].bytes) return storage[a].bytes > storage[b].bytes;
    return std::pair(storage[a].first, a) < std::pair(storage[b].first, b);
  });
  // Overlapping storages in offset order come either from the time blocks (a short
  // lifetime) or from a scan of every placed storage, whichever reads fewer.
  TimeBlocks by_time(points);
  OffsetOrder all_placed;
  std::vector<int64_t> offset(n, 0);
  for (int32_t item : items) {
    const Storage& s = storage[item];
    // Gaps between the overlapping storages (which may overlap one another in memory, being
    // disjoint in time), and the end of the highest of them.
    int64_t best = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t end = 0;
    // Branch-free: which storages overlap, and where the gaps are, is unpredictable. A
    // storage that does not overlap reads as an empty chunk at `end` (no gap, no end).
    auto visit = [&](const Placed& p, bool live) {
      const int64_t mask = -static_cast<int64_t>(live);
      const int64_t gap = (p.lo - end) & mask;
      const bool better = (gap >= s.bytes) & (gap < best_gap);
      best = better ? end : best;
      best_gap = better ? gap : best_gap;
      end = std::max(end, p.hi & mask);
    };
    if (by_time.cost(s.first, s.last) < all_placed.size()) {
      by_time.for_each(s.first, s.last, visit);
    } else {
      all_placed.for_each(s.first, s.last, visit);
    }
    offset[item] = best >= 0 ? best : end;
    const Placed placed{offset[item], offset[item] + s.bytes, s.first, s.last};
    by_time.insert(placed);
    all_placed.insert(placed);
    result.arena_bytes = std::max(result.arena_bytes, placed.hi);
  }
  for (int32_t i = 0; i < n; ++i) result.offsets[i] = offset[root[i]];
  return result;
}

}  // namespace ampc::lower
