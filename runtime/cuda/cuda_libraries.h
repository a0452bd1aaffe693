// cuBLASLt and cuDNN are opened at run time, the first time a plan on a GPU calls into them,
// and never by a command that runs on the CPU: those libraries are large (cuBLASLt alone maps
// over 500 MB and runs finalisers at exit) and a machine without them must still compile,
// inspect and train on the CPU. The binary is linked against the stubs in lazy_cublaslt.cc and
// lazy_cudnn.cc, which resolve each entry point from the library on first use.
#pragma once

#include <string>

namespace ampc::rt::cuda {

// The libraries, by the soname the headers were built against (libcublasLt.so.13, ...).
enum class CudaLibrary { kCublasLt, kCudnn, kNccl };

// Opens the library if it is not open yet; throws ampc::Error naming the file and why it could
// not be loaded (dlerror), with the hint to put its folder on LD_LIBRARY_PATH.
void load_library(CudaLibrary library);

// The address of `symbol` in `library` (opened on demand). Throws ampc::Error if the library
// lacks it (an older release than the headers).
void* library_symbol(CudaLibrary library, const char* symbol);

// library_symbol as a pointer to the function type `Fn` (the header's declaration).
template <typename Fn>
Fn* library_function(CudaLibrary library, const char* symbol) {
  return reinterpret_cast<Fn*>(library_symbol(library, symbol));
}

// Whether the library has been opened by this process (tests check that CPU commands do not).
bool library_loaded(CudaLibrary library);

// "cuBLASLt 130100, cuDNN 91900": the versions of the libraries opened so far.
std::string loaded_library_versions();

}  // namespace ampc::rt::cuda
