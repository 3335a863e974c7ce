// CUDA launch helper shared by the op kernels (included by framework/ops/*.cu only).
//
//   struct Relu { const float* inp; float* out; __device__ void operator()(long long i) const {...} };
//   detail::launch_for_each("relu", n, Relu{...});
#pragma once

#include "framework/cuda_check.h"

namespace gat::ops::detail {

// Grid-stride loop: f(i) for i in [0, n), one thread per i at a time.
template <class F>
__global__ void for_each_kernel(long long n, F f) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    f(i);
}

// Launches for_each_kernel on gat::cuda::stream() and checks the launch; `name` names the op
// in the error. Nothing is launched for n == 0.
template <class F>
void launch_for_each(const char* name, long long n, const F& f) {
  if (n == 0) return;
  for_each_kernel<<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(n, f);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace gat::ops::detail
