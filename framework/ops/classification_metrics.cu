#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/detail/row_reduce.cuh"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kReduceThreads = 1024;  // as masked_cross_entropy's mean: the same sums, the same bits

// What became of one listed row.
constexpr int32_t kWrong = 0, kRight = 1, kOutside = 2;

// The splits' index tensors laid end to end: listed row g (over all splits) is entry
// g - first[s] of split s, first[s] <= g < first[s + 1].
struct Splits {
  const int32_t* index[kMaxSplits];  // (K_s,) each
  long long first[kMaxSplits + 1];
  int count;
};

// One warp per listed row g: nll[g] as masked_cross_entropy's (NaN for a row or label out of
// range), outcome[g] whether the row's argmax is its label or the entry is out of range.
template <class T>
__global__ void metrics_rows_kernel(const T* __restrict__ logits,        // (N, C)
                                    const int32_t* __restrict__ labels,  // (N,)
                                    const __grid_constant__ Splits splits,
                                    T* __restrict__ nll,            // (total,)
                                    int32_t* __restrict__ outcome,  // (total,)
                                    long long N, long long C) {
  const long long total = splits.first[splits.count];
  for_each_warp_row(total, [&](long long g, int lane) {
    int s = 0;
    while (g >= splits.first[s + 1]) ++s;
    const int32_t r = splits.index[s][g - splits.first[s]];
    const T v = warp_row_nll(logits, labels, r, N, C, lane);
    if (lane == 0) {
      nll[g] = v;
      if (r < 0 || r >= N)
        outcome[g] = kOutside;
      else
        outcome[g] = row_argmax(logits + r * C, C) == labels[r] ? kRight : kWrong;
    }
  });
}

// Block s: out[s] = {sum of split s's nll / K_s (the order of masked_cross_entropy's mean),
// rows right, entries outside [0, N)}.
template <class T>
__global__ void metrics_reduce_kernel(const T* __restrict__ nll,            // (total,)
                                      const int32_t* __restrict__ outcome,  // (total,)
                                      const __grid_constant__ Splits splits,
                                      double* __restrict__ out) {  // (S, 3)
  __shared__ T partial[kReduceThreads];
  __shared__ int partial_count[kReduceThreads];
  const int s = blockIdx.x;
  const long long first = splits.first[s], K = splits.first[s + 1] - first;
  T sum = 0;
  int right = 0, outside = 0;
  for (long long k = threadIdx.x; k < K; k += blockDim.x) {
    sum += nll[first + k];
    right += outcome[first + k] == kRight;
    outside += outcome[first + k] == kOutside;
  }
  sum = block_tree_sum(sum, partial);
  right = block_tree_sum(right, partial_count);
  outside = block_tree_sum(outside, partial_count);
  if (threadIdx.x != 0) return;
  out[3 * s] = static_cast<double>(sum / static_cast<T>(K));
  out[3 * s + 1] = right;
  out[3 * s + 2] = outside;
}

}  // namespace

void classification_metrics(const Tensor& logits, const Tensor& labels, const std::vector<Tensor>& splits,
                            Tensor& out) {
  const long long N = logits.size(0), C = logits.size(1);
  Splits table{};
  table.count = static_cast<int>(splits.size());
  for (int s = 0; s < table.count; ++s) {
    table.index[s] = splits[s].data<int32_t>();
    table.first[s + 1] = table.first[s] + splits[s].numel();
  }
  const long long total = table.first[table.count];
  Tensor outcome =
      Tensor::empty({total}, DType::i32, Device::cuda, "classification_metrics outcome");  // (total,)
  dispatch_float(logits.dtype(), "classification_metrics", [&](auto zero) {
    using T = decltype(zero);
    Tensor nll =
        Tensor::empty({total}, logits.dtype(), Device::cuda, "classification_metrics nll");  // (total,)
    metrics_rows_kernel<T><<<cuda::blocks_for(total * kWarp), 256, 0, cuda::stream()>>>(
        logits.data<T>(), labels.data<int32_t>(), table, nll.data<T>(), outcome.data<int32_t>(), N, C);
    CUDA_CHECK_LAUNCH("metrics_rows_kernel");
    metrics_reduce_kernel<T><<<table.count, kReduceThreads, 0, cuda::stream()>>>(
        nll.data<T>(), outcome.data<int32_t>(), table, out.data<double>());
    CUDA_CHECK_LAUNCH("metrics_reduce_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
