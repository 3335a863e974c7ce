// Device helpers shared by the CUDA graph ops (csr_softmax_aggregate, gat_edge_scores).
// Included by framework/ops/*.cu only.
#pragma once

#include <cuda_runtime.h>

#include "gat/framework/cuda_check.h"

namespace gat::ops::cuda_impl::warps {

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

// A warp over the (entry, head) values of one node's list of entries, P heads at a time. With
// P = H (when H divides 32) the list's values, stored (entry, head), are contiguous: lane k takes
// head k % P of entries first + k / P, first + k / P + 32 / P, ...; otherwise P = 1, a warp per
// (node, head). Work items: N * blocks; item w is node w / blocks, heads from (w % blocks) * P.
// The lane's constants are worked out once, and an item costs no 64-bit division when a warp
// takes a whole node (a division per item measured 0.1 ms of a 2.9 ms backward at 1M nodes).
struct HeadLanes {
  int P;          // heads per warp
  int blocks;     // warps per node
  int lane_head;  // this lane's head within the warp's block of heads
  int first;      // this lane's first entry in a node's list
  int stride;     // entries between a lane's values
  __host__ __device__ explicit HeadLanes(int H, int lane = 0)
      : P(H <= kWarp && kWarp % H == 0 ? H : 1),
        blocks(H / P),
        lane_head(lane % P),
        first(lane / P),
        stride(kWarp / P) {}
  // Item w -> its node and this lane's head.
  __device__ void item(long long w, long long& node, int& h) const {
    if (blocks == 1) {
      node = w;
      h = lane_head;
    } else {
      node = w / blocks;
      h = static_cast<int>(w - node * blocks) * P + lane_head;
    }
  }
  // Sum over the lanes of this lane's head (fixed butterfly; all 32 lanes must call it).
  template <class T>
  __device__ T sum(T v) const {
    for (int offset = kWarp / 2; offset >= P; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
  }
};

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
  if (b > cuda::kMaxGridBlocks) b = cuda::kMaxGridBlocks;
  return static_cast<unsigned>(b);
}

}  // namespace gat::ops::cuda_impl::warps
