#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/row_reduce.cuh"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kReduceThreads = 1024;

// One warp per used row: nll[k] = logsumexp(logits[r]) - logits[r, labels[r]], r = index[k];
// NaN for an out-of-range row or label.
template <class T>
__global__ void nll_rows_kernel(const T* __restrict__ logits,       // (N, C)
                                const int32_t* __restrict__ labels,  // (N,)
                                const int32_t* __restrict__ index,   // (K,)
                                T* __restrict__ nll,                 // (K,)
                                long long N, long long C, long long K) {
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)gridDim.x * (blockDim.x / kWarp);
  for (long long k = blockIdx.x * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp; k < K; k += warps) {
    const T v = warp_row_nll(logits, labels, index[k], N, C, lane);
    if (lane == 0) nll[k] = v;
  }
}

// One block: loss = sum(nll) / K, each thread summing a strided slice, then a shared-memory tree
// (a fixed order, so the result is bitwise reproducible).
template <class T>
__global__ void mean_kernel(const T* __restrict__ nll,  // (K,)
                            T* __restrict__ loss,       // ()
                            long long K) {
  __shared__ T partial[kReduceThreads];
  T sum = 0;
  for (long long k = threadIdx.x; k < K; k += blockDim.x) sum += nll[k];
  sum = block_tree_sum(sum, partial);
  if (threadIdx.x == 0) loss[0] = sum / static_cast<T>(K);
}

// count[r] += 1 for every in-range r in index (integer atomics: order-independent).
__global__ void count_rows_kernel(const int32_t* __restrict__ index,  // (K,)
                                  int32_t* __restrict__ count,        // (N,)
                                  long long N, long long K) {
  for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < K;
       k += (long long)gridDim.x * blockDim.x) {
    const int32_t r = index[k];
    if (r >= 0 && r < N) atomicAdd(&count[r], 1);
  }
}

// A warp per 32 consecutive rows. Rows that no index entry names (count 0; at scale nearly all) or
// whose label is out of range are zero, written by the warp's lanes together over the block's
// rows * C values; each remaining row then by the whole warp:
// dlogits[r] = dloss * count[r] / K * (softmax(logits[r]) - onehot(labels[r])).
template <class T>
__global__ void nll_backward_kernel(const T* __restrict__ logits,       // (N, C)
                                    const int32_t* __restrict__ labels,  // (N,)
                                    const int32_t* __restrict__ count,   // (N,)
                                    const T* __restrict__ dloss,         // ()
                                    T* __restrict__ dlogits,             // (N, C)
                                    long long N, long long C, long long K) {
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)gridDim.x * (blockDim.x / kWarp);
  for (long long first = (blockIdx.x * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp) * kWarp; first < N;
       first += warps * kWarp) {
    const long long rows = min(static_cast<long long>(kWarp), N - first);
    bool counted = false;  // this lane's row first + lane
    if (lane < rows) {
      const int32_t y = labels[first + lane];
      counted = count[first + lane] != 0 && y >= 0 && y < C;
    }
    const unsigned counted_rows = __ballot_sync(0xffffffffu, counted);
    T* block = dlogits + first * C;  // (rows, C)
    for (long long x = lane; x < rows * C; x += kWarp)
      if (!((counted_rows >> (x / C)) & 1u)) block[x] = 0;
    for (unsigned left = counted_rows; left != 0; left &= left - 1) {
      const long long r = first + __ffs(left) - 1;
      const T* row = logits + r * C;
      const int32_t y = labels[r];
      const T lse = warp_row_logsumexp(row, C, lane);
      const T s = dloss[0] / static_cast<T>(K) * static_cast<T>(count[r]);
      for (long long c = lane; c < C; c += kWarp) dlogits[r * C + c] = s * (exp(row[c] - lse) - (c == y ? T(1) : T(0)));
    }
  }
}

}  // namespace

void masked_cross_entropy_forward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                  Tensor& loss) {
  const long long N = logits.size(0), C = logits.size(1), K = index.numel();
  dispatch_float(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    Tensor nll = Tensor::empty({K}, logits.dtype(), Device::cuda, "masked_cross_entropy nll");  // (K,)
    nll_rows_kernel<T><<<cuda::blocks_for(K * kWarp), 256, 0, cuda::stream()>>>(
        logits.data<T>(), labels.data<int32_t>(), index.data<int32_t>(), nll.data<T>(), N, C, K);
    CUDA_CHECK_LAUNCH("nll_rows_kernel");
    mean_kernel<T><<<1, kReduceThreads, 0, cuda::stream()>>>(nll.data<T>(), loss.data<T>(), K);
    CUDA_CHECK_LAUNCH("mean_kernel");
  });
}

void masked_cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                   const Tensor& grad_loss, Tensor& grad_logits) {
  const long long N = logits.size(0), C = logits.size(1), K = index.numel();
  if (N * C == 0) return;
  Tensor count = Tensor::zeros({N}, DType::i32, Device::cuda);  // (N,)
  count_rows_kernel<<<cuda::blocks_for(K), 256, 0, cuda::stream()>>>(index.data<int32_t>(),
                                                                      count.data<int32_t>(), N, K);
  CUDA_CHECK_LAUNCH("count_rows_kernel");
  dispatch_float(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    nll_backward_kernel<T><<<cuda::blocks_for(N), 256, 0, cuda::stream()>>>(  // a lane per row
        logits.data<T>(), labels.data<int32_t>(), count.data<int32_t>(), grad_loss.data<T>(),
        grad_logits.data<T>(), N, C, K);
    CUDA_CHECK_LAUNCH("nll_backward_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
