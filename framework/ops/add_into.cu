#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/add_into.h"

namespace gat::ops::cuda_impl {

namespace {
template <class T>
__global__ void add_into_kernel(T* __restrict__ dst, const T* __restrict__ src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] += src[i];
}
}  // namespace

void add_into(Tensor& dst, const Tensor& src) {
  const long long n = dst.numel();
  if (n == 0) return;
  dispatch_float(dst.dtype(), "add_into", [&](auto zero) {
    using T = decltype(zero);
    add_into_kernel<T><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(dst.data<T>(), src.data<T>(), n);
    CUDA_CHECK_LAUNCH("add_into_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
