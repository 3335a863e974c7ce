#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/micro_f1.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kThreads = 256;

// counts += {tp, fp, fn, bad labels} of the n pairs: each thread counts its pairs, the block sums
// the threads' counts in shared memory and adds them with one atomic per count. The counts are
// whole numbers below 2^53, so the doubles' sums are exact in any order.
template <class T>
__global__ void micro_f1_counts_kernel(const T* __restrict__ logits,  // (n,)
                                       const T* __restrict__ labels,  // (n,)
                                       double* __restrict__ counts,   // (4,)
                                       long long n) {
  __shared__ long long block[4][kThreads];
  long long c[4] = {0, 0, 0, 0};
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n;
       k += (long long)gridDim.x * blockDim.x) {
    const bool positive = logits[k] > T(0), labelled = labels[k] == T(1);
    c[0] += positive && labelled;
    c[1] += positive && !labelled;
    c[2] += !positive && labelled;
    c[3] += !(labels[k] == T(0) || labelled);
  }
  for (int j = 0; j < 4; ++j) block[j][threadIdx.x] = c[j];
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      for (int j = 0; j < 4; ++j) block[j][threadIdx.x] += block[j][threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x < 4 && block[threadIdx.x][0] != 0)
    atomicAdd(&counts[threadIdx.x], static_cast<double>(block[threadIdx.x][0]));
}

}  // namespace

void micro_f1_counts(const Tensor& logits, const Tensor& labels, Tensor& counts) {
  const long long n = logits.numel();
  dispatch_float(logits.dtype(), "micro_f1", [&](auto zero) {
    using T = decltype(zero);
    micro_f1_counts_kernel<T><<<cuda::blocks_for(n, kThreads), kThreads, 0, cuda::stream()>>>(
        logits.data<T>(), labels.data<T>(), counts.data<double>(), n);
    CUDA_CHECK_LAUNCH("micro_f1_counts_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
