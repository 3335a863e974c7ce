#include <algorithm>

#include "gat/framework/ops/loops.cuh"
#include "gat/framework/ops/sparse_matmul.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kThreads = 256;

// Lanes per output row: the smallest power of two >= N, at most a warp (lanes stride over N).
int lanes_for(long long N) {
  int lanes = 1;
  while (lanes < 32 && lanes < N) lanes *= 2;
  return lanes;
}

// out (R, N): a group of `lanes` consecutive threads per row r (grid-stride over rows), lane l
// computing columns l, l + lanes, ...; each sums its row's entries in CSR order (the CPU order).
template <class T>
__global__ void __launch_bounds__(kThreads)
sparse_rows_kernel(const int32_t* __restrict__ ptr,     // (R+1,)
                   const int32_t* __restrict__ entry,   // (nnz,) or null for the identity
                   const int32_t* __restrict__ index,   // (nnz,) dense row of each entry
                   const T* __restrict__ values,        // (nnz,)
                   const T* __restrict__ dense,         // (*, N)
                   T* __restrict__ out,                 // (R, N)
                   long long R, long long N, int lanes) {
  const long long thread = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long groups = static_cast<long long>(gridDim.x) * blockDim.x / lanes;
  const int lane = static_cast<int>(thread % lanes);
  for (long long r = thread / lanes; r < R; r += groups) {
    const int begin = ptr[r], end = ptr[r + 1];
    for (long long j = lane; j < N; j += lanes) {
      T acc = T(0);
      for (int p = begin; p < end; ++p) {
        const int e = entry ? entry[p] : p;
        const T v = values[e];
        if (v == T(0)) continue;
        acc += v * dense[static_cast<long long>(index[e]) * N + j];
      }
      out[r * N + j] = acc;
    }
  }
}

// The same with a block per row r (grid-stride over rows), for matrices with few rows whose
// longest rows would leave one group of lanes summing thousands of entries alone (the feature
// gradient of Cora: 1,433 rows, the most common word in 1,000+ documents). The block's kSlices
// slices take the row's entries p = begin + s, begin + s + kSlices, ...; a slice's kLanes lanes
// hold kCols columns each (a tile of kLanes * kCols columns per pass over the entries); the
// slices' partial sums meet in shared memory and are added in slice order: a fixed order, so
// results are reproducible (they differ from the CPU's sequential sum by rounding).
template <class T>
__global__ void __launch_bounds__(kThreads)
sparse_rows_block_kernel(const int32_t* __restrict__ ptr,    // (R+1,)
                         const int32_t* __restrict__ entry,  // (nnz,) or null for the identity
                         const int32_t* __restrict__ index,  // (nnz,) dense row of each entry
                         const T* __restrict__ values,       // (nnz,)
                         const T* __restrict__ dense,        // (*, N)
                         T* __restrict__ out,                // (R, N)
                         long long R, long long N) {
  constexpr int kLanes = 16, kCols = 4, kSlices = kThreads / kLanes, kTile = kLanes * kCols;
  constexpr int kBatch = 4;
  __shared__ T partial[kSlices][kTile];
  const int lane = threadIdx.x % kLanes, slice = threadIdx.x / kLanes;
  for (long long r = blockIdx.x; r < R; r += gridDim.x) {
    const int begin = ptr[r], end = ptr[r + 1];
    for (long long j0 = 0; j0 < N; j0 += kTile) {
      T acc[kCols] = {};
      // The slice's entries p, p + kSlices, ... in order, kBatch at a time: their entry, value
      // and index loads are issued together (one entry at a time, the longest row of Cora's
      // feature gradient, 1,000+ entries, was a 45 us chain of dependent loads).
      for (int p0 = begin + slice; p0 < end; p0 += kSlices * kBatch) {
        int e[kBatch];
        T v[kBatch];
        long long src[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int p = p0 + u * kSlices;
          e[u] = p < end ? (entry ? entry[p] : p) : -1;
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          v[u] = e[u] >= 0 ? values[e[u]] : T(0);
          src[u] = e[u] >= 0 ? index[e[u]] : 0;
        }
        // The batch's dense values are all loaded before any is added: one load latency a batch,
        // not one an entry (the adds are conditional, so a load could not be moved above the
        // previous add). An entry holding zero loads nothing and adds nothing.
        T d[kBatch][kCols];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const T* row = dense + src[u] * N + j0 + lane;
#pragma unroll
          for (int k = 0; k < kCols; ++k)
            d[u][k] = v[u] != T(0) && j0 + lane + k * kLanes < N ? row[k * kLanes] : T(0);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          if (v[u] == T(0)) continue;
#pragma unroll
          for (int k = 0; k < kCols; ++k)
            if (j0 + lane + k * kLanes < N) acc[k] += v[u] * d[u][k];
        }
      }
#pragma unroll
      for (int k = 0; k < kCols; ++k) partial[slice][lane + k * kLanes] = acc[k];
      __syncthreads();
      for (int c = threadIdx.x; c < kTile && j0 + c < N; c += kThreads) {
        T sum = partial[0][c];
        for (int k = 1; k < kSlices; ++k) sum += partial[k][c];
        out[r * N + j0 + c] = sum;
      }
      __syncthreads();
    }
  }
}

// Below this many threads the one-group-per-row kernel leaves the GPU mostly idle (an H200 holds
// 132 x 2048): the block-per-row kernel is used.
constexpr long long kBlockPerRowBelowThreads = 1 << 18;

// out (nnz,) [e] = g[row[e], :] . b[col[e], :], one thread per entry, j ascending (as the CPU).
template <class T>
struct SparseDotsFn {
  const int32_t* row;  // (nnz,)
  const int32_t* col;  // (nnz,)
  const T* g;          // (M, N)
  const T* b;          // (K, N)
  long long N;
  T* out;              // (nnz,)
  __device__ void operator()(long long e) const {
    const T* gi = g + static_cast<long long>(row[e]) * N;
    const T* bk = b + static_cast<long long>(col[e]) * N;
    T acc = T(0);
    for (long long j = 0; j < N; ++j) acc += gi[j] * bk[j];
    out[e] = acc;
  }
};

}  // namespace

void sparse_rows(const SparseRows& a, const Tensor& dense, Tensor& out) {
  const long long R = out.size(0), N = out.size(1);
  if (R == 0 || N == 0) return;
  const int lanes = lanes_for(N);
  dispatch_float(out.dtype(), "sparse_matmul", [&](auto zero) {
    using T = decltype(zero);
    if (R * lanes < kBlockPerRowBelowThreads) {
      const unsigned blocks = static_cast<unsigned>(std::min<long long>(R, cuda::kMaxGridBlocks));
      sparse_rows_block_kernel<T><<<blocks, kThreads, 0, cuda::stream()>>>(
          a.ptr.data<int32_t>(), a.entry ? a.entry->data<int32_t>() : nullptr,
          a.index.data<int32_t>(), a.values.data<T>(), dense.data<T>(), out.data<T>(), R, N);
      CUDA_CHECK_LAUNCH("sparse_matmul rows (block per row)");
      return;
    }
    sparse_rows_kernel<T><<<cuda::blocks_for(R * lanes, kThreads), kThreads, 0, cuda::stream()>>>(
        a.ptr.data<int32_t>(), a.entry ? a.entry->data<int32_t>() : nullptr,
        a.index.data<int32_t>(), a.values.data<T>(), dense.data<T>(), out.data<T>(), R, N, lanes);
    CUDA_CHECK_LAUNCH("sparse_matmul rows");
  });
}

void sparse_dots(const CsrMatrix& a, const Tensor& g, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "sparse_matmul", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("sparse_matmul dots", out.numel(),
                            SparseDotsFn<T>{a.row_idx().data<int32_t>(), a.col_idx().data<int32_t>(),
                                            g.data<T>(), b.data<T>(), g.size(1), out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
