// Device helpers shared by the CUDA graph ops (csr_softmax_aggregate, gat_edge_scores).
// Included by framework/ops/*.cu only.
#pragma once

#include <cuda_runtime.h>

namespace gat::ops::cuda_impl::graph {

constexpr int kWarp = 32;

// Sum over the G consecutive lanes of an aligned group (G a power of two <= 32), by a fixed
// butterfly: every lane of the group gets the same, reproducible result. All G lanes of the
// group must call it; the other groups of the warp may be elsewhere.
template <int G, class T>
__device__ __forceinline__ T group_sum(T v) {
  const unsigned lanes = G == kWarp ? 0xffffffffu : (1u << (G % kWarp)) - 1;
  const unsigned mask = lanes << ((threadIdx.x % kWarp) & ~(G - 1));
#pragma unroll
  for (int offset = G / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset);
  return v;
}

// Global index of this thread's warp and the number of warps in the grid.
__device__ __forceinline__ long long warp_id() {
  return (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / kWarp;
}
__device__ __forceinline__ long long warp_count() {
  return gridDim.x * static_cast<long long>(blockDim.x) / kWarp;
}

// Blocks of `threads` threads for one warp per item over n items (grid-stride beyond the cap).
inline unsigned warp_blocks(long long n, unsigned threads = 256) {
  long long b = (n * kWarp + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535LL * 32) b = 65535LL * 32;
  return static_cast<unsigned>(b);
}

}  // namespace gat::ops::cuda_impl::graph
