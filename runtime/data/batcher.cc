#include "runtime/data/batcher.h"

#include <cstring>
#include <numeric>
#include <random>
#include <utility>

#include "base/error.h"
#include "base/half.h"

namespace ampc::rt::data {

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
  std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t j = rng() % static_cast<uint64_t>(i + 1);
    std::swap(order[static_cast<size_t>(i)], order[j]);
  }
  return order;
}

namespace {

// Whether data of type `from` feeds an input of type `to` by rounding (--half-inputs).
bool rounds_to(DType from, DType to) {
  return from == DType::kFloat32 && (to == DType::kFloat16 || to == DType::kBFloat16);
}

// n fp32 values rounded to nearest even into fp16 or bf16 at `dst` (2 bytes each).
void round_floats(const float* src, size_t n, DType to, uint8_t* dst) {
  for (size_t k = 0; k < n; ++k) {
    if (to == DType::kFloat16) {
      const Half h = float_to_half(src[k]);
      std::memcpy(dst + 2 * k, &h, 2);
    } else {
      const BFloat16 b = float_to_bf16(src[k]);
      std::memcpy(dst + 2 * k, &b, 2);
    }
  }
}

}  // namespace

Batcher::Batcher(Dataset data, std::map<std::string, InputSpec> inputs, BatchOptions options)
    : data_(std::move(data)), inputs_(std::move(inputs)), options_(options) {
  const std::string source = "'" + data_.source() + "'";
  if (options_.batch_size < 1) {
    throw Error("batch size must be at least 1, got " + std::to_string(options_.batch_size));
  }
  for (const auto& [name, spec] : inputs_) {
    const std::string expected = std::string(dtype_name(spec.dtype)) + shape_str(spec.sample_shape);
    const Array* a = data_.find(name);
    if (!a) {
      std::string have;
      for (const auto& [n, arr] : data_.arrays()) have += (have.empty() ? "" : ", ") + n;
      throw Error("input '" + name + "' (" + expected + " per sample) has no array in " + source +
                  ", which holds: " + have);
    }
    const std::string found = std::string(dtype_name(a->dtype)) + shape_str(a->sample_shape());
    if (a->dtype != spec.dtype && !rounds_to(a->dtype, spec.dtype)) {
      throw Error("input '" + name + "' expects element type " +
                  std::string(dtype_name(spec.dtype)) + ", but array '" + name + "' in " + source +
                  " is " + std::string(dtype_name(a->dtype)));
    }
    if (a->sample_shape() != spec.sample_shape) {
      throw Error("input '" + name + "' expects samples of shape " + shape_str(spec.sample_shape) +
                  ", but array '" + name + "' in " + source + " is " + a->type_str() +
                  " (samples of shape " + shape_str(a->sample_shape()) + ")");
    }
  }
  if (options_.shards < 1 || options_.shard < 0 || options_.shard >= options_.shards)
    throw Error("internal: shard " + std::to_string(options_.shard) + " of " +
                std::to_string(options_.shards));
  const int64_t global = options_.batch_size * options_.shards;
  if (data_.samples() < global) {
    throw Error(source + " has " + std::to_string(data_.samples()) +
                " samples, fewer than the batch size " + std::to_string(options_.batch_size) +
                (options_.shards > 1 ? " x " + std::to_string(options_.shards) + " ranks" : ""));
  }
  per_epoch_ = data_.samples() / global;
}

const std::vector<int64_t>& Batcher::order(int64_t epoch) {
  if (epoch != order_epoch_) {
    if (options_.shuffle) {
      order_ = shuffled_order(data_.samples(), options_.seed, epoch);
    } else if (order_.empty()) {
      order_.resize(static_cast<size_t>(data_.samples()));
      std::iota(order_.begin(), order_.end(), 0);
    }
    order_epoch_ = epoch;
  }
  return order_;
}

std::vector<int64_t> Batcher::indices(int64_t k) {
  if (k < 0) throw Error("internal: negative batch index " + std::to_string(k));
  const std::vector<int64_t>& o = order(k / per_epoch_);
  const auto first =
      o.begin() + ((k % per_epoch_) * options_.shards + options_.shard) * options_.batch_size;
  return {first, first + options_.batch_size};
}

std::map<std::string, Tensor> Batcher::batch(int64_t k) {
  const std::vector<int64_t> idx = indices(k);
  std::map<std::string, Tensor> out;
  for (const auto& [name, spec] : inputs_) {
    const Array& a = *data_.find(name);
    std::vector<int64_t> shape = spec.sample_shape;
    shape.insert(shape.begin(), options_.batch_size);
    Tensor t(spec.dtype, std::move(shape));
    const size_t row = a.sample_bytes();
    if (a.dtype != spec.dtype) {  // fp32 data for a 16-bit input (--half-inputs): rounded
      const size_t n = row / sizeof(float);
      for (size_t i = 0; i < idx.size(); ++i) {
        const auto* src =
            reinterpret_cast<const float*>(a.data + static_cast<size_t>(idx[i]) * row);
        round_floats(src, n, spec.dtype, static_cast<uint8_t*>(t.raw()) + i * n * 2);
      }
      out.emplace(name, std::move(t));
      continue;
    }
    auto* dst = static_cast<uint8_t*>(t.raw());
    for (size_t i = 0; i < idx.size(); ++i) {
      std::memcpy(dst + i * row, a.data + static_cast<size_t>(idx[i]) * row, row);
    }
    out.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace ampc::rt::data
