#include "runtime/data/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "base/checked_size.h"
#include "base/error.h"
#include "runtime/io/npy.h"

namespace ampc::rt::data {
namespace {
namespace fs = std::filesystem;

std::string in_quotes(const std::string& s) {
  return "'" + s + "'";
}

bool ends_with_npy(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0;
}

// An Array over the whole .npy file `bytes`, which `owner` keeps alive.
Array array_from_npy(std::string_view bytes, std::shared_ptr<const void> owner,
                     const std::string& what) {
  const io::NpyHeader h = io::parse_npy_header(bytes, what);
  if (h.shape.empty()) {
    throw Error(what + " is a scalar; every array needs a first (sample) axis");
  }
  Array a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.data = reinterpret_cast<const uint8_t*>(bytes.data()) + h.data_offset;
  a.owner = std::move(owner);
  return a;
}

std::string zip_message(int code) {
  zip_error_t err;
  zip_error_init_with_code(&err, code);
  std::string message = zip_error_strerror(&err);
  zip_error_fini(&err);
  return message;
}

// A read-only private mapping of a whole file, unmapped when the last Array lets go.
struct Mapping {
  void* addr = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, size);
  }
};

std::shared_ptr<const Mapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + in_quotes(path) + ": " + std::strerror(errno));
  auto m = std::make_shared<Mapping>();
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    m->size = static_cast<size_t>(st.st_size);
    m->addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  }
  const int mmap_errno = errno;
  ::close(fd);
  if (m->size > 0 && m->addr == MAP_FAILED) {
    throw Error("cannot memory-map " + in_quotes(path) + ": " + std::strerror(mmap_errno));
  }
  return m;
}

}  // namespace

size_t Array::sample_bytes() const {
  return static_cast<size_t>(checked_tensor_bytes(sample_shape(), dtype_size(dtype), "a sample"));
}

std::string Array::type_str() const {
  return std::string(dtype_name(dtype)) + shape_str(shape);
}

Tensor Array::to_tensor() const {
  Tensor t(dtype, shape);
  if (t.nbytes() > 0) std::memcpy(t.raw(), data, t.nbytes());
  return t;
}

Dataset::Dataset(std::string source, std::map<std::string, Array> arrays)
    : source_(std::move(source)), arrays_(std::move(arrays)) {
  if (arrays_.empty()) throw Error(in_quotes(source_) + " holds no .npy arrays");
  const auto& [first_name, first] = *arrays_.begin();
  samples_ = first.shape[0];
  for (const auto& [name, a] : arrays_) {
    if (a.shape[0] != samples_) {
      throw Error(in_quotes(source_) + ": arrays have different numbers of samples (first axis): " +
                  in_quotes(first_name) + " is " + first.type_str() + ", " + in_quotes(name) +
                  " is " + a.type_str());
    }
  }
}

Dataset Dataset::from_arrays(std::string source, std::map<std::string, Array> arrays) {
  for (const auto& [name, a] : arrays) {
    if (a.shape.empty())
      throw Error(in_quotes(source) + ": array " + in_quotes(name) + " has no first (sample) axis");
  }
  return Dataset(std::move(source), std::move(arrays));
}

Dataset Dataset::open(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error("data " + in_quotes(path) + " does not exist");
  if (fs::is_directory(status)) return map_folder(path);
  return read_npz(path);
}

Dataset Dataset::read_npz(const std::string& path) {
  int code = 0;
  std::unique_ptr<zip_t, void (*)(zip_t*)> zip(::zip_open(path.c_str(), ZIP_RDONLY, &code),
                                               ::zip_discard);
  if (!zip) {
    if (code == ZIP_ER_NOZIP) {
      throw Error("data " + in_quotes(path) +
                  " is neither a folder of .npy files nor an .npz (zip) file");
    }
    throw Error("cannot open " + in_quotes(path) + " as .npz: " + zip_message(code));
  }
  std::error_code size_error;
  const zip_uint64_t file_bytes = fs::file_size(path, size_error);
  if (size_error) throw Error("cannot read the size of " + in_quotes(path));
  std::map<std::string, Array> arrays;
  const zip_int64_t entries = ::zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (::zip_stat_index(zip.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) {
      throw Error(in_quotes(path) + ": " + ::zip_strerror(zip.get()));
    }
    const std::string entry = st.name;
    if (!entry.empty() && entry.back() == '/') continue;  // a folder entry
    if (!ends_with_npy(entry)) {
      throw Error(in_quotes(path) + ": entry " + in_quotes(entry) + " is not a .npy array");
    }
    const std::string name = entry.substr(0, entry.size() - 4);
    const std::string what = in_quotes(path) + " array " + in_quotes(name);
    // The size is what the zip's directory declares; deflate expands at most 1032-fold, so a
    // larger claim is a corrupt (or hostile) file, refused before allocating for it (found
    // by the npz_read fuzzer: 1 GiB claimed by a 570-byte file).
    // The compressed size is itself only a claim of the directory: no entry holds more than
    // the file, so the bound above is taken from the smaller of the two.
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_size > file_bytes) {
      throw Error(what + ": the zip entry claims " + std::to_string(st.comp_size) +
                  " compressed bytes in a file of " + std::to_string(file_bytes) +
                  "; the file is corrupt");
    }
    const zip_uint64_t compressed = (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size : file_bytes;
    if (st.size > compressed * 1100 + 4096) {
      throw Error(what + ": the zip entry claims " + std::to_string(st.size) + " bytes from " +
                  std::to_string(compressed) +
                  " compressed, more than deflate can expand; the "
                  "file is corrupt");
    }
    auto bytes = std::make_shared<std::string>(static_cast<size_t>(st.size), '\0');
    zip_file_t* file = ::zip_fopen_index(zip.get(), static_cast<zip_uint64_t>(i), 0);
    if (!file) throw Error(what + ": " + ::zip_strerror(zip.get()));
    const zip_int64_t got = ::zip_fread(file, bytes->data(), bytes->size());
    const std::string file_error = got < 0 ? ::zip_file_strerror(file) : "";
    ::zip_fclose(file);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size) {
      throw Error(what + ": cannot decompress: " +
                  (got < 0 ? file_error : std::string("entry is truncated")));
    }
    const std::string_view view(*bytes);
    arrays[name] = array_from_npy(view, std::move(bytes), what);
  }
  return Dataset(path, std::move(arrays));
}

Dataset Dataset::map_folder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) throw Error("data " + in_quotes(path) + " is not a folder");
  std::map<std::string, Array> arrays;
  for (const fs::directory_entry& e : fs::directory_iterator(path)) {
    const std::string file = e.path().filename().string();
    if (!e.is_regular_file() || !ends_with_npy(file)) continue;
    const std::string name = file.substr(0, file.size() - 4);
    std::shared_ptr<const Mapping> m = map_file(e.path().string());
    const std::string_view bytes(m->size ? static_cast<const char*>(m->addr) : "", m->size);
    arrays[name] =
        array_from_npy(bytes, m, in_quotes(e.path().string()) + " array " + in_quotes(name));
  }
  return Dataset(path, std::move(arrays));
}

const Array* Dataset::find(const std::string& name) const {
  auto it = arrays_.find(name);
  return it == arrays_.end() ? nullptr : &it->second;
}

Dataset Dataset::slice(int64_t begin, int64_t end) const {
  if (begin < 0 || begin > end || end > samples_) {
    throw Error("cannot take samples [" + std::to_string(begin) + ", " + std::to_string(end) +
                ") of " + in_quotes(source_) + ", which has " + std::to_string(samples_));
  }
  std::map<std::string, Array> arrays = arrays_;
  for (auto& [name, a] : arrays) {
    a.data += static_cast<size_t>(begin) * a.sample_bytes();
    a.shape[0] = end - begin;
  }
  Dataset out = *this;
  out.arrays_ = std::move(arrays);
  out.samples_ = end - begin;
  return out;
}

std::pair<Dataset, Dataset> split(const Dataset& data, int64_t n) {
  return {data.slice(0, n), data.slice(n, data.samples())};
}

}  // namespace ampc::rt::data
