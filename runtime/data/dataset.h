// Training data: named arrays that share their first axis (the sample axis), read from an
// .npz file (decompressed into memory through libzip) or from a folder of NAME.npy files
// (memory-mapped read-only, so a data set larger than memory works).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace ampc::rt::data {

// One array of a Dataset: C-order elements of `dtype`, shape[0] = samples. The bytes are
// borrowed from `owner` (a decompressed buffer or a file mapping) and live as long as it.
struct Array {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;

  std::vector<int64_t> sample_shape() const { return {shape.begin() + 1, shape.end()}; }
  size_t sample_bytes() const;   // bytes of one sample
  std::string type_str() const;  // "f32[1797,64]"
  Tensor to_tensor() const;      // a copy of the whole array
};

class Dataset {
 public:
  // A folder is read as NAME.npy files (other files are ignored); anything else must be an
  // .npz (zip) file whose entries are all NAME.npy. Throws ampc::Error naming the file and
  // array for: a path that is neither, an entry that is not a .npy array, an unsupported
  // dtype, an array without a first axis, arrays with different first-axis lengths.
  static Dataset open(const std::string& path);
  static Dataset read_npz(const std::string& path);
  static Dataset map_folder(const std::string& path);
  // Arrays already in memory (the Python API's held-out data), borrowed as they are; each
  // needs a first axis. `source` names them in messages.
  static Dataset from_arrays(std::string source, std::map<std::string, Array> arrays);

  const std::string& source() const { return source_; }  // the path, for messages
  int64_t samples() const { return samples_; }
  const std::map<std::string, Array>& arrays() const { return arrays_; }
  const Array* find(const std::string& name) const;

  // Samples [begin, end) of every array, sharing storage with this one.
  Dataset slice(int64_t begin, int64_t end) const;

 private:
  Dataset(std::string source, std::map<std::string, Array> arrays);

  std::string source_;
  std::map<std::string, Array> arrays_;
  int64_t samples_ = 0;
};

// The first `n` samples and the rest (e.g. a held-out split); 0 <= n <= samples.
std::pair<Dataset, Dataset> split(const Dataset& data, int64_t n);

}  // namespace ampc::rt::data
