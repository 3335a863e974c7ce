#include <type_traits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/detail/last_block.cuh"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/row_reduce.cuh"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kReduceThreads = 1024;

// One warp per used row: nll[k] = logsumexp(logits[r]) - logits[r, labels[r]], r = index[k];
// NaN for an out-of-range row or label. Then the grid's last block: loss = sum(nll) / K, each of
// its kReduceThreads threads summing a strided slice, then a shared-memory tree (a fixed order,
// so the result is bitwise reproducible; classification_metrics sums the same way). Logits stored
// as T are computed on in M = opmath_t<T>, the dtype of nll and of the loss (f32 for bf16).
struct NllMeanSum;  // last_block_to_arrive's tag
template <class T, class M = detail::opmath_t<T>>
__global__ void __launch_bounds__(kReduceThreads) nll_mean_kernel(const T* __restrict__ logits,  // (N, C)
                                                                  const int32_t* __restrict__ labels,  // (N,)
                                                                  const int32_t* __restrict__ index,   // (K,)
                                                                  M* nll,                              // (K,)
                                                                  M* __restrict__ loss,                // ()
                                                                  long long N, long long C, long long K) {
  for_each_warp_row(K, [&](long long k, int lane) {
    const M v = warp_row_nll(logits, labels, index[k], N, C, lane);
    if (lane == 0) nll[k] = v;
  });
  if (!gat::detail::last_block_to_arrive<NllMeanSum>()) return;
  __shared__ M partial[kReduceThreads];
  M sum = 0;
  for (long long k = threadIdx.x; k < K; k += blockDim.x) sum += __ldcg(nll + k);
  sum = block_tree_sum(sum, partial);
  if (threadIdx.x == 0) loss[0] = sum / static_cast<M>(K);
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

// Two kinds of blocks in one launch. The first `zero_blocks` take a thread per row and zero the
// rows that no index entry names (count 0; at scale nearly all of them) or whose label is out of
// range; the rest take a warp per index entry k and write its row r = index[k] (a row named twice
// is written twice with the same values):
// dlogits[r] = dloss * count[r] / K * (softmax(logits[r]) - onehot(labels[r])).
// A warp per row for all N rows took 0.62 ms at 5M rows; a warp per 32 rows that then did their
// counted rows one after another made Cora's step 20 us longer (its 140 training rows are rows
// 0-139).
// The rows no index entry counts are zeroed VEC values a store (16-byte vectors where C and the
// pointer allow: one value at a time, 5M rows of 8 took 0.23 ms). Logits stored as T are computed
// on in M = opmath_t<T>, dloss's dtype; each gradient is rounded once to T.
template <class T, int VEC, class M = detail::opmath_t<T>>
__global__ void nll_backward_kernel(const T* __restrict__ logits,        // (N, C)
                                    const int32_t* __restrict__ labels,  // (N,)
                                    const int32_t* __restrict__ index,   // (K,)
                                    const int32_t* __restrict__ count,   // (N,)
                                    const M* __restrict__ dloss,         // ()
                                    T* __restrict__ dlogits,             // (N, C)
                                    long long N, long long C, long long K, unsigned zero_blocks) {
  if (blockIdx.x < zero_blocks) {
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < N;
         r += (long long)zero_blocks * blockDim.x) {
      const int32_t y = labels[r];
      if (count[r] != 0 && y >= 0 && y < C) continue;  // written by an index entry's warp
      for (long long c = 0; c < C; c += VEC)
        detail::store_vec<T, VEC>(dlogits + r * C + c, detail::Vec<T, VEC>{});
    }
    return;
  }
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)(gridDim.x - zero_blocks) * (blockDim.x / kWarp);
  for (long long k = (blockIdx.x - zero_blocks) * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp;
       k < K; k += warps) {
    const int32_t r = index[k];
    if (r < 0 || r >= N) continue;  // not counted (the loss is NaN)
    const int32_t y = labels[r];
    if (y < 0 || y >= C) continue;  // zeroed by the first blocks (the loss is NaN)
    const T* row = logits + r * C;
    const M lse = warp_row_logsumexp(row, C, lane);
    const M s = dloss[0] / static_cast<M>(K) * static_cast<M>(count[r]);
    for (long long c = lane; c < C; c += kWarp)
      dlogits[r * C + c] =
          detail::from_opmath<T>(s * (exp(detail::to_opmath(row[c]) - lse) - (c == y ? M(1) : M(0))));
  }
}

}  // namespace

void masked_cross_entropy_forward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                  Tensor& loss) {
  const long long N = logits.size(0), C = logits.size(1), K = index.numel();
  detail::dispatch_float_or_bf16(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    Tensor nll = Tensor::empty({K}, loss.dtype(), Device::cuda, "masked_cross_entropy nll");  // (K,)
    nll_mean_kernel<T><<<cuda::blocks_for(K * kWarp, kReduceThreads), kReduceThreads, 0, cuda::stream()>>>(
        logits.data<T>(), labels.data<int32_t>(), index.data<int32_t>(), nll.data<M>(), loss.data<M>(), N, C,
        K);
    CUDA_CHECK_LAUNCH("nll_mean_kernel");
  });
}

void masked_row_counts(const Tensor& index, Tensor& count) {
  const long long N = count.numel(), K = index.numel();
  if (N == 0) return;
  count.zero_();
  if (K == 0) return;
  count_rows_kernel<<<cuda::blocks_for(K), 256, 0, cuda::stream()>>>(index.data<int32_t>(),
                                                                     count.data<int32_t>(), N, K);
  CUDA_CHECK_LAUNCH("count_rows_kernel");
}

void masked_cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& index,
                                   const Tensor& count, const Tensor& grad_loss, Tensor& grad_logits) {
  const long long N = logits.size(0), C = logits.size(1), K = index.numel();
  if (N * C == 0) return;
  detail::dispatch_float_or_bf16(logits.dtype(), "masked_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    const unsigned zero_blocks = cuda::blocks_for(N);
    auto launch = [&](auto vec) {
      nll_backward_kernel<T, decltype(vec)::value>
          <<<zero_blocks + cuda::blocks_for(K * kWarp), 256, 0, cuda::stream()>>>(
              logits.data<T>(), labels.data<int32_t>(), index.data<int32_t>(), count.data<int32_t>(),
              grad_loss.data<M>(), grad_logits.data<T>(), N, C, K, zero_blocks);
      CUDA_CHECK_LAUNCH("nll_backward_kernel");
    };
    constexpr int kVec = 16 / sizeof(T);
    if (C % kVec == 0 && detail::all_aligned(16, {grad_logits.data<T>()}))
      launch(std::integral_constant<int, kVec>{});
    else
      launch(std::integral_constant<int, 1>{});
  });
}

}  // namespace gat::ops::cuda_impl
