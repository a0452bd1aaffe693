#include "base/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.h"

namespace ampc {

std::string temp_path_beside(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = temp_path_beside(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(tmp);
      throw Error("cannot write '" + path + "': write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error("cannot write '" + path + "': " + ec.message());
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  // Into one allocation of the file's size where it has one (a plan or a model holds its
  // parameters: hundreds of MB), read in blocks: a string stream would grow by copying and
  // copy the whole once more for its result, three times the file's bytes at the peak.
  std::string bytes;
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(path, ec); !ec) bytes.reserve(size);
  std::vector<char> block(size_t{1} << 20);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0)
    bytes.append(block.data(), static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace ampc
