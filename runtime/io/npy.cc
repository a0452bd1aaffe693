#include "runtime/io/npy.h"

#include <cstring>
#include <regex>

#include "base/checked_size.h"
#include "base/error.h"
#include "base/file_util.h"

namespace ampc::rt::io {
namespace {

struct Descr {
  const char* code;
  DType dtype;
};

// NumPy dtype strings for the element types we exchange ('<' little-endian, '|' no order).
constexpr Descr kDescr[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
    {"<i8", DType::kInt64},   {"<i4", DType::kInt32},   {"<i2", DType::kInt16},
    {"|i1", DType::kInt8},    {"<u8", DType::kUInt64},  {"<u4", DType::kUInt32},
    {"<u2", DType::kUInt16},  {"|u1", DType::kUInt8},   {"|b1", DType::kBool},
};

}  // namespace

NpyHeader parse_npy_header(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    throw Error(what + " is not a .npy file");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw Error(what + " is truncated");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    throw Error(what + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  if (bytes.size() < offset + header_len) throw Error(what + " is truncated (header)");
  const std::string header(bytes.substr(offset, header_len));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    throw Error(what + ": no descr in header");
  const std::string descr = m[1];
  if (!std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))"))) {
    throw Error(what + ": no fortran_order in header");
  }
  if (m[1] == "True")
    throw Error(what + ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    throw Error(what + ": no shape in header");
  NpyHeader h;
  const std::string dims = m[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    const std::string digits = it->str();
    if (digits.size() > 18) throw Error(what + ": dimension " + digits + " in header is too large");
    h.shape.push_back(std::stoll(digits));
  }
  for (const auto& d : kDescr) {
    std::string alt = d.code;
    if (alt[0] == '<') alt[0] = '=';
    if (descr == d.code || descr == alt) h.dtype = d.dtype;
  }
  if (h.dtype == DType::kUndefined)
    throw Error(what + ": NumPy dtype '" + descr + "' is not supported");
  h.data_offset = offset + header_len;
  h.data_bytes = static_cast<size_t>(checked_tensor_bytes(h.shape, dtype_size(h.dtype), what));
  if (bytes.size() - h.data_offset != h.data_bytes) {
    throw Error(what + ": data has " + std::to_string(bytes.size() - h.data_offset) + " bytes, " +
                std::string(dtype_name(h.dtype)) + shape_str(h.shape) + " needs " +
                std::to_string(h.data_bytes));
  }
  return h;
}

Tensor parse_npy(const std::string& bytes, const std::string& what) {
  const NpyHeader h = parse_npy_header(bytes, what);
  Tensor t(h.dtype, h.shape);
  if (h.data_bytes > 0) std::memcpy(t.raw(), bytes.data() + h.data_offset, h.data_bytes);
  return t;
}

std::string serialize_npy(const Tensor& t) {
  const char* code = nullptr;
  for (const auto& d : kDescr) {
    if (d.dtype == t.dtype()) code = d.code;
  }
  if (!code)
    throw Error("element type " + std::string(dtype_name(t.dtype())) +
                " cannot be written as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += std::to_string(t.shape()[i]) +
             (t.shape().size() == 1 ? "," : (i + 1 < t.shape().size() ? ", " : ""));
  shape += ")";
  std::string header =
      std::string("{'descr': '") + code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces so the data starts on a 64-byte boundary, ending in a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Tensor read_npy(const std::string& path) {
  return parse_npy(read_file(path), "'" + path + "'");
}

void write_npy(const Tensor& t, const std::string& path) {
  write_file_atomically(path, serialize_npy(t));
}

}  // namespace ampc::rt::io
