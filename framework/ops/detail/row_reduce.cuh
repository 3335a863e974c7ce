// Warp-level row reductions shared by the CUDA kernels of log_softmax, masked_cross_entropy and
// classification_metrics, and the block sum of the latter two.
// One warp owns one row; lanes stride over its C columns and combine with a butterfly of
// shuffles, so every lane ends with the same result and the summation order is fixed
// (bitwise reproducible, no atomics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gat/framework/ops/detail/convert.h"

namespace gat::ops::cuda_impl {

constexpr int kWarp = 32;

// One warp per row: calls row(r, lane) for each row r of [0, rows) that this thread's warp takes,
// the warps of the grid striding over the rows (every lane of a warp gets the same r).
template <class Row>
__device__ __forceinline__ void for_each_warp_row(long long rows, Row&& row) {
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)gridDim.x * (blockDim.x / kWarp);
  for (long long r = blockIdx.x * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp; r < rows; r += warps)
    row(r, lane);
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// logsumexp of row (C,), computed by the whole warp (every lane must call it); -inf for a row of
// -inf or C = 0. Matches cpu_impl::row_logsumexp up to summation order.
// A row stored as T is read in M = opmath_t<T> (f32 for bf16; detail/convert.h), as are the
// results.
template <class T, class M = detail::opmath_t<T>>
__device__ M warp_row_logsumexp(const T* __restrict__ row, int64_t C, int lane) {
  M max = -INFINITY;
  for (int64_t c = lane; c < C; c += kWarp) max = fmax(max, detail::to_opmath(row[c]));
  max = warp_max(max);
  if (max == -INFINITY) return max;
  M sum = 0;
  for (int64_t c = lane; c < C; c += kWarp) sum += exp(detail::to_opmath(row[c]) - max);
  return max + log(warp_sum(sum));
}

// The negative log-likelihood logsumexp(logits[r]) - logits[r, labels[r]] of row r of logits
// (N, C), computed by the whole warp (every lane must call it; every lane gets it); NaN for a row
// r outside [0, N) or a label outside [0, C).
template <class T, class M = detail::opmath_t<T>>
__device__ M warp_row_nll(const T* __restrict__ logits, const int32_t* __restrict__ labels, int32_t r,
                          int64_t N, int64_t C, int lane) {
  const int32_t y = (r >= 0 && r < N) ? labels[r] : -1;
  if (y < 0 || y >= C) return NAN;  // uniform across the warp
  return warp_row_logsumexp(logits + r * C, C, lane) - detail::to_opmath(logits[r * C + y]);
}

// The sums of every thread's v[0..W) over a block of blockDim.x threads (a power of two), one
// fixed shared-memory tree per j, the W trees level by level (bitwise reproducible); every thread
// gets them. partial: W * blockDim.x values of shared memory, free again when the function returns.
template <int W, class T>
__device__ void block_tree_sums(const T (&v)[W], T* partial, T (&sums)[W]) {
#pragma unroll
  for (int j = 0; j < W; ++j) partial[j * blockDim.x + threadIdx.x] = v[j];
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
#pragma unroll
      for (int j = 0; j < W; ++j)
        partial[j * blockDim.x + threadIdx.x] += partial[j * blockDim.x + threadIdx.x + half];
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < W; ++j) sums[j] = partial[j * blockDim.x];
  __syncthreads();  // everyone has read the sums before the array is used again
}

// The sum of every thread's v over the block (block_tree_sums of one value). partial: blockDim.x
// values of shared memory.
template <class T>
__device__ T block_tree_sum(T v, T* partial) {
  const T in[1] = {v};
  T sum[1];
  block_tree_sums(in, partial, sum);
  return sum[0];
}

}  // namespace gat::ops::cuda_impl
