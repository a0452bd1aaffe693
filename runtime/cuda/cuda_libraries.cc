#include "runtime/cuda/cuda_libraries.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>

#include <array>
#include <mutex>

#include "base/error.h"

// "13" from 13: the sonames follow the headers' major versions.
#define AMPC_STRINGIFY_(x) #x
#define AMPC_STRINGIFY(x) AMPC_STRINGIFY_(x)

namespace ampc::rt::cuda {
namespace {

struct LibraryFile {
  const char* soname;
  const char* what;  // for messages
};

constexpr std::array<LibraryFile, 3> kFiles = {{
    {"libcublasLt.so." AMPC_STRINGIFY(CUBLAS_VER_MAJOR), "cuBLASLt"},
    {"libcudnn.so." AMPC_STRINGIFY(CUDNN_MAJOR), "cuDNN"},
    {"libnccl.so." AMPC_STRINGIFY(NCCL_MAJOR), "NCCL"},  // data parallel (nccl_comm.h)
}};

struct OpenLibraries {
  std::mutex mutex;
  std::array<void*, kFiles.size()> handles{};
};

OpenLibraries& open_libraries() {
  // Never destroyed: the handles stay open until the process ends, as a linked library would.
  static auto* libraries = new OpenLibraries;
  return *libraries;
}

// dlopen by soname first (LD_LIBRARY_PATH, the system's cache), then in the folders of the
// toolkit this binary was built with.
void* open_file(const LibraryFile& file, std::string& errors) {
  for (const std::string& dir : {std::string(), std::string(AMPC_CUDA_LIBRARY_DIR) + "/",
                                 std::string(AMPC_CUDNN_LIBRARY_DIR) + "/"}) {
    if (void* handle = ::dlopen((dir + file.soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    if (const char* e = ::dlerror()) errors = e;
    if (dir.empty() && errors.find("No such file") == std::string::npos)
      break;  // found, but broken
  }
  return nullptr;
}

void* handle_of(CudaLibrary library) {
  const size_t i = static_cast<size_t>(library);
  OpenLibraries& libs = open_libraries();
  std::lock_guard lock(libs.mutex);
  if (libs.handles[i] == nullptr) {
    std::string errors;
    libs.handles[i] = open_file(kFiles[i], errors);
    if (libs.handles[i] == nullptr) {
      throw Error(std::string(kFiles[i].what) + " is needed to run this plan on a GPU, but " +
                  kFiles[i].soname + " could not be loaded (" + errors +
                  "); put its folder on LD_LIBRARY_PATH, or use --device cpu");
    }
  }
  return libs.handles[i];
}

}  // namespace

void load_library(CudaLibrary library) {
  (void)handle_of(library);
}

void* library_symbol(CudaLibrary library, const char* symbol) {
  void* handle = handle_of(library);
  void* address = ::dlsym(handle, symbol);
  if (address == nullptr) {
    throw Error(std::string(kFiles[static_cast<size_t>(library)].soname) + " has no '" + symbol +
                "': the library is older than the headers ampc was built with");
  }
  return address;
}

bool library_loaded(CudaLibrary library) {
  OpenLibraries& libs = open_libraries();
  std::lock_guard lock(libs.mutex);
  return libs.handles[static_cast<size_t>(library)] != nullptr;
}

std::string loaded_library_versions() {
  std::string out;
  if (library_loaded(CudaLibrary::kCublasLt))
    out += "cuBLASLt " + std::to_string(cublasLtGetVersion());
  if (library_loaded(CudaLibrary::kCudnn)) {
    out += (out.empty() ? "" : ", ") + std::string("cuDNN ") + std::to_string(cudnnGetVersion());
  }
  return out.empty() ? "no CUDA library loaded" : out;
}

}  // namespace ampc::rt::cuda
