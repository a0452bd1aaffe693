// The first statement of every GPU test: skips (printing "skipped: no CUDA device", which
// tests/gpu/run.sh and scripts/test.sh count) only on a machine without a GPU or driver, and
// fails when CUDA is there but unusable (an old driver...), so that such a machine never
// passes the suite by skipping it (runtime/cuda/device_status.h).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/cuda/device_status.h"

#define AMPC_REQUIRE_CUDA_DEVICE()                                                      \
  do {                                                                                  \
    cudaError_t ampc_status_ = cudaSuccess;                                             \
    switch (::ampc::rt::cuda::query_device_status(&ampc_status_)) {                     \
      case ::ampc::rt::cuda::DeviceStatus::kUsable:                                     \
        break;                                                                          \
      case ::ampc::rt::cuda::DeviceStatus::kNoDevice:                                   \
        std::printf("skipped: no CUDA device\n");                                       \
        std::fflush(stdout);                                                            \
        GTEST_SKIP() << "no CUDA device";                                               \
      case ::ampc::rt::cuda::DeviceStatus::kUnusable:                                   \
        FAIL() << "CUDA is not usable here: " << cudaGetErrorName(ampc_status_) << " (" \
               << cudaGetErrorString(ampc_status_) << ")";                              \
    }                                                                                   \
  } while (0)
