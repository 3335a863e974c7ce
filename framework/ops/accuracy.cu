#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/accuracy.h"

namespace gat::ops::cuda_impl {

namespace {

// One thread per row (C, the number of classes, is small).
template <class T>
__global__ void argmax_kernel(const T* __restrict__ inp,  // (N, C)
                              int32_t* __restrict__ out,  // (N,)
                              long long N, long long C) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < N;
       r += (long long)gridDim.x * blockDim.x)
    out[r] = row_argmax(inp + r * C, C);
}

// counts[0] += rows whose prediction matches the label, counts[1] += out-of-range index entries
// (integer atomics: the totals do not depend on the order).
__global__ void count_correct_kernel(const int32_t* __restrict__ pred,    // (N,)
                                     const int32_t* __restrict__ labels,  // (N,)
                                     const int32_t* __restrict__ index,   // (K,)
                                     int32_t* __restrict__ counts,        // (2,)
                                     long long N, long long K) {
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < K;
       k += (long long)gridDim.x * blockDim.x) {
    const int32_t r = index[k];
    if (r < 0 || r >= N)
      atomicAdd(&counts[1], 1);
    else if (pred[r] == labels[r])
      atomicAdd(&counts[0], 1);
  }
}

}  // namespace

void argmax(const Tensor& x, Tensor& out) {
  const long long N = x.size(0), C = x.size(1);
  if (N == 0) return;
  dispatch_float(x.dtype(), "argmax", [&](auto zero) {
    using T = decltype(zero);
    argmax_kernel<T><<<cuda::blocks_for(N), 256, 0, cuda::stream()>>>(x.data<T>(), out.data<int32_t>(), N, C);
    CUDA_CHECK_LAUNCH("argmax_kernel");
  });
}

void count_correct(const Tensor& pred, const Tensor& labels, const Tensor& index, Tensor& counts) {
  const long long N = pred.numel(), K = index.numel();
  count_correct_kernel<<<cuda::blocks_for(K), 256, 0, cuda::stream()>>>(
      pred.data<int32_t>(), labels.data<int32_t>(), index.data<int32_t>(), counts.data<int32_t>(), N, K);
  CUDA_CHECK_LAUNCH("count_correct_kernel");
}

}  // namespace gat::ops::cuda_impl
