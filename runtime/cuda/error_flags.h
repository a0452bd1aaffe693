// Device-side error flags and the runs in flight, host logic only (no CUDA calls, so that
// tests/unit/cuda_preflight_test.cc checks it with the kernels' CPU twins).
//
// A kernel that meets an input the CPU backend would refuse (a Gather / ScatterND index or a
// cross-entropy label out of range) cannot throw: it clamps, sets its step's int32 flag and
// goes on. The flags lie together after the outputs in the output block, so that each run's
// one device-to-host copy brings them back; the step graph starts with a memset node that
// clears them (clear_range), so each run reports only what it met itself.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace ampc::rt::cuda {

class ErrorFlags {
 public:
  // A flag that step `step` (its label) sets when `what` happens; returns its index.
  int reserve(const std::string& step, const std::string& what);
  int count() const { return static_cast<int>(flags_.size()); }
  // The flags' bytes: 4 each, rounded up to 256 (what the memset node clears).
  int64_t bytes() const;
  // Byte offset of flag k from the first.
  static int64_t offset(int k) { return 4 * static_cast<int64_t>(k); }
  // "<step>: <what>" for every flag set in a host copy of the flags, in reservation order.
  std::vector<std::string> set_in(const char* flags) const;

 private:
  std::vector<std::pair<std::string, std::string>> flags_;  // step, what
};

// The runs submitted and not yet collected, slot k holding the k-th (pinned staging).
class PendingRuns {
 public:
  explicit PendingRuns(int64_t depth) : depth_(depth < 1 ? 1 : depth) {}
  int64_t depth() const { return depth_; }
  int64_t count() const { return count_; }
  bool full() const { return count_ == depth_; }
  int64_t next_slot() const { return count_; }
  void add() { ++count_; }

  // read(slot) for every pending run in order, then the queue is empty; also when a read
  // throws: the error of the first failing run is rethrown after every slot was read (its
  // flags came with it), so no run is reported twice and none is left pending.
  template <typename Read>
  auto drain(Read read) -> std::vector<decltype(read(int64_t{0}))> {
    std::vector<decltype(read(int64_t{0}))> out;
    std::exception_ptr first;
    const int64_t n = count_;
    count_ = 0;
    for (int64_t s = 0; s < n; ++s) {
      try {
        out.push_back(read(s));
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
    return out;
  }

 private:
  int64_t depth_;
  int64_t count_ = 0;
};

}  // namespace ampc::rt::cuda
