#include "runtime/plan/plan_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "base/error.h"
#include "base/file_util.h"

namespace ampc::plan {
namespace {

constexpr char kMagic[8] = {'A', 'M', 'P', 'C', 'P', 'L', 'A', 'N'};
constexpr size_t kHeaderSize = 8 + 4 + 8 + 8;

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(data[i])) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

template <typename T>
T get(const std::string& in, size_t offset) {
  T v;
  std::memcpy(&v, in.data() + offset, sizeof(T));
  return v;
}

}  // namespace

std::string serialize_plan(const Plan& plan) {
  std::string payload;
  if (!plan.SerializeToString(&payload)) throw Error("cannot serialise the plan (over 2 GiB?)");
  return frame_plan_payload(payload);
}

std::string frame_plan_payload(const std::string& payload) {
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kPlanFormatVersion);
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, fnv1a(payload.data(), payload.size()));
  out += payload;
  return out;
}

Plan parse_plan(const std::string& bytes, const std::string& what) {
  if (bytes.empty())
    throw Error(what + " is empty (not an ampc plan, or one truncated to nothing)");
  // A file that starts like a plan but ends inside the header is a truncated plan.
  const size_t head = std::min(bytes.size(), sizeof kMagic);
  if (std::memcmp(bytes.data(), kMagic, head) != 0)
    throw Error(what + " is not an ampc plan (no AMPCPLAN header)");
  if (bytes.size() < kHeaderSize) {
    throw Error(what + " is truncated: " + std::to_string(bytes.size()) + " bytes, less than the " +
                std::to_string(kHeaderSize) + "-byte plan header");
  }
  const auto version = get<uint32_t>(bytes, 8);
  if (version != kPlanFormatVersion) {
    throw Error(what + " has plan format version " + std::to_string(version) +
                "; this ampc reads version " + std::to_string(kPlanFormatVersion) +
                " (recompile the model)");
  }
  const auto size = get<uint64_t>(bytes, 12);
  if (bytes.size() - kHeaderSize != size) {
    throw Error(what + (bytes.size() - kHeaderSize < size ? " is truncated" : " is padded") +
                ": payload has " + std::to_string(bytes.size() - kHeaderSize) +
                " bytes, header says " + std::to_string(size));
  }
  if (fnv1a(bytes.data() + kHeaderSize, size) != get<uint64_t>(bytes, 20)) {
    throw Error(what + " is corrupted (checksum mismatch)");
  }
  // Protobuf parses at most 2 GiB from one array; a larger payload is not a plan it wrote.
  if (size > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    throw Error(what + " is corrupted (payload of " + std::to_string(size) +
                " bytes, over protobuf's 2 GiB)");
  }
  Plan plan;
  if (!plan.ParseFromArray(bytes.data() + kHeaderSize, static_cast<int>(size))) {
    throw Error(what + " is corrupted (payload does not parse)");
  }
  return plan;
}

void save_plan(const Plan& plan, const std::string& path) {
  write_file_atomically(path, serialize_plan(plan));
}

Plan load_plan(const std::string& path) {
  return parse_plan(read_file(path), "'" + path + "'");
}

bool looks_like_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof kMagic] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && std::memcmp(head, kMagic, sizeof kMagic) == 0;
}

}  // namespace ampc::plan
