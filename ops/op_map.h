// The one map behind every per-operator registry of code (CPU operators, CUDA step builders,
// gradient rules): entries keyed by OpKey, one per operator. A second entry for an op is a
// second definition of it, refused when the registry is built (std::logic_error naming the op),
// so no registry can silently keep the first or the last of two.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_key.h"

namespace ampc::ops {

template <typename T>
class OpMap {
 public:
  // `what` names an entry in the message of a duplicate ("CPU operator", "gradient rule").
  explicit OpMap(std::string what) : what_(std::move(what)) {}

  void add(const OpKey& key, T value) {
    if (!entries_.emplace(key, std::move(value)).second)
      throw std::logic_error(what_ + " for '" + key.str() + "' is defined twice");
  }
  // Null when the op has no entry.
  const T* find(const OpKey& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second;
  }
  std::vector<OpKey> keys() const {
    std::vector<OpKey> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

 private:
  std::string what_;
  std::map<OpKey, T> entries_;
};

}  // namespace ampc::ops
