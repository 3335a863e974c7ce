// Wall time of device work, shared by the benchmark programs.
#pragma once

#include <chrono>
#include <functional>

#include "gat/framework/tensor.h"
#if GAT_WITH_CUDA
#include "gat/framework/cuda_check.h"
#endif

namespace gat::bench {

// Milliseconds that `calls` back-to-back calls of fn take: on CUDA between two events recorded on
// the framework's stream (the launches queue up, so launch gaps count but host overhead hidden
// behind running kernels does not); on the CPU by a steady clock.
inline double time_ms(Device device, const std::function<void()>& fn, int calls = 1) {
#if GAT_WITH_CUDA
  if (device == Device::cuda) {
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaEventRecord(start, cuda::stream()));
    for (int i = 0; i < calls; ++i) fn();
    CUDA_CHECK(cudaEventRecord(stop, cuda::stream()));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return ms;
  }
#endif
  (void)device;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace gat::bench
