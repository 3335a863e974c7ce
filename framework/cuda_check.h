// CUDA_CHECK / CUBLAS_CHECK / CUDA_CHECK_LAUNCH: a failed CUDA call becomes a gat::Error.
// Include only from .cu files or files compiled with the CUDA toolkit's headers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "gat/framework/check.h"

// A failed call also leaves its error as the thread's last error: CUDA_CHECK takes it, so that the
// next launch check does not report it again (an error that is sticky stays, as it must).
#define CUDA_CHECK(call)                                                                \
  do {                                                                                  \
    cudaError_t gat_cuda_status_ = (call);                                              \
    if (gat_cuda_status_ != cudaSuccess) {                                              \
      (void)cudaGetLastError();                                                         \
      GAT_FAIL("CUDA error in ", #call, ": ", cudaGetErrorName(gat_cuda_status_), " (", \
               cudaGetErrorString(gat_cuda_status_), ")");                              \
    }                                                                                   \
  } while (0)

// After every kernel launch: catches bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH(kernel_name)                                                                \
  do {                                                                                                \
    cudaError_t gat_cuda_status_ = cudaGetLastError();                                                \
    if (gat_cuda_status_ != cudaSuccess)                                                              \
      GAT_FAIL("CUDA launch of ", kernel_name, " failed: ", cudaGetErrorName(gat_cuda_status_), " (", \
               cudaGetErrorString(gat_cuda_status_), ")");                                            \
  } while (0)

#define CUBLAS_CHECK(call)                                                                \
  do {                                                                                    \
    cublasStatus_t gat_cublas_status_ = (call);                                           \
    if (gat_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                      \
      GAT_FAIL("cuBLAS error in ", #call, ": ", cublasGetStatusName(gat_cublas_status_)); \
  } while (0)

namespace gat::cuda {
cudaStream_t stream();           // the stream ops queue on: the main one, or the side one (OnSideStream)
cublasHandle_t cublas_handle();  // bound to stream()
// The most blocks a 1-D grid-stride launch asks for: enough to fill any GPU many times over, and
// far below the grid's x limit; larger problems loop.
constexpr long long kMaxGridBlocks = 65535LL * 32;
// Blocks for 1-D grid-stride kernels over n elements.
inline unsigned blocks_for(long long n, unsigned threads = 256) {
  long long b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > kMaxGridBlocks) b = kMaxGridBlocks;
  return static_cast<unsigned>(b);
}
}  // namespace gat::cuda
