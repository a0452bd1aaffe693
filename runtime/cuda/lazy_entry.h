// The stub that lazy_cublaslt.cc, lazy_cudnn.cc and lazy_nccl.cc define for each entry point
// they list: the function with the header's signature, resolving the symbol from its library
// (cuda_libraries.h) on its first call.
#pragma once

#include <type_traits>

#include "runtime/cuda/cuda_libraries.h"

// Defines `name` with the header's signature; its first call looks the symbol up once in
// CudaLibrary::`library`. `ret` is the return type, with the header's calling convention
// where it has one (CUBLASWINAPI, CUDNNWINAPI).
#define AMPC_LAZY_ENTRY(library, ret, name, params, args)                         \
  extern "C" ret name params {                                                    \
    static auto* const fn =                                                       \
        ampc::rt::cuda::library_function<std::remove_pointer_t<decltype(&name)>>( \
            ampc::rt::cuda::CudaLibrary::library, #name);                         \
    return fn args;                                                               \
  }
