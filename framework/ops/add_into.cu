#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/add_into.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {
template <class T>
__global__ void add_into_kernel(T* __restrict__ dst, const T* __restrict__ src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] += src[i];
}

// The sum in f32, rounded once.
struct AddIntoBf16 {
  bf16* dst;        // (n,)
  const bf16* src;  // (n,)
  template <class I>
  __device__ void operator()(I i) const {
    dst[i] = to_bf16(to_f32(dst[i]) + to_f32(src[i]));
  }
};
}  // namespace

void add_into(Tensor& dst, const Tensor& src) {
  const long long n = dst.numel();
  if (n == 0) return;
  if (dst.dtype() == DType::bf16)
    return detail::launch_for_each("add_into", n, AddIntoBf16{dst.data<bf16>(), src.data<bf16>()});
  dispatch_float(dst.dtype(), "add_into", [&](auto zero) {
    using T = decltype(zero);
    add_into_kernel<T><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(dst.data<T>(), src.data<T>(), n);
    CUDA_CHECK_LAUNCH("add_into_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
