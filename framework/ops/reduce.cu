#include <algorithm>

#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kRowThreads = 256;      // inner == 1: threads along the axis (a power of two: tree below)
constexpr int kTileCols = 32;         // inner > 1: one warp reads 32 adjacent columns ...
constexpr int kTileRows = 8;          // ... and 8 warps stride down the axis
constexpr long long kMinChunk = 256;  // axis elements one block adds (at least) ...
// ... and enough chunks for 16 blocks per H200 SM: a block's threads add their elements one after
// the other, so a long axis needs many blocks in flight to hide the loads' latency (with 2 blocks
// per SM, the bias gradient over 5M rows of 64 ran at 0.3 TB/s, 4 ms).
constexpr long long kTargetBlocks = 2112;

constexpr long long kMaxGridX = cuda::kMaxGridBlocks;
constexpr long long kMaxGridY = 65535;

// One block's sum of one output over one chunk of the axis: straight to out when the axis is a
// single chunk, else to partial for the second pass.
template <class T>
__device__ void store_sum(double s, long long chunk, long long chunks, long long outputs, long long r, T* out,
                          double* partial) {
  if (chunks == 1)
    out[r] = static_cast<T>(s);
  else
    partial[chunk * outputs + r] = s;
}

// inner == 1. Block (r, c) adds x[r, chunk c]: the threads stride the chunk, then a
// shared-memory tree adds their partial sums.
template <class T>
__global__ void sum_rows_kernel(const T* __restrict__ x,  // (outputs, len)
                                long long outputs, long long len, long long chunk_len, long long chunks,
                                T* __restrict__ out,             // (outputs,)
                                double* __restrict__ partial) {  // (chunks, outputs) when chunks > 1
  __shared__ double tree[kRowThreads];
  const long long c = blockIdx.y;
  const long long begin = c * chunk_len, end = min(len, begin + chunk_len);
  for (long long r = blockIdx.x; r < outputs; r += gridDim.x) {
    const T* row = x + r * len;
    double acc = 0.0;
    for (long long l = begin + threadIdx.x; l < end; l += kRowThreads) acc += static_cast<double>(row[l]);
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kRowThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) tree[threadIdx.x] += tree[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) store_sum(tree[0], c, chunks, outputs, r, out, partial);
    __syncthreads();  // tree[0] is read before the next output overwrites it
  }
}

// inner > 1. Block (t, c) adds a 32-column tile t of x over chunk c of the axis: each warp reads
// 32 adjacent columns of one axis row (coalesced), the 8 warps stride the chunk, then one thread
// per column adds the 8 warp sums in order.
template <class T>
__global__ void sum_columns_kernel(const T* __restrict__ x,  // (outer, len, inner)
                                   long long outer, long long len, long long inner, long long chunk_len,
                                   long long chunks,
                                   T* __restrict__ out,             // (outer, inner)
                                   double* __restrict__ partial) {  // (chunks, outer * inner) when chunks > 1
  __shared__ double tile[kTileRows][kTileCols];
  const long long col_tiles = (inner + kTileCols - 1) / kTileCols;
  const long long c = blockIdx.y;
  const long long begin = c * chunk_len, end = min(len, begin + chunk_len);
  for (long long t = blockIdx.x; t < outer * col_tiles; t += gridDim.x) {
    const long long o = t / col_tiles, i = t % col_tiles * kTileCols + threadIdx.x;
    double acc = 0.0;
    if (i < inner)
      for (long long l = begin + threadIdx.y; l < end; l += kTileRows)
        acc += static_cast<double>(x[(o * len + l) * inner + i]);
    tile[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
      double s = 0.0;
      for (int k = 0; k < kTileRows; ++k) s += tile[k][threadIdx.x];
      store_sum(s, c, chunks, outer * inner, o * inner + i, out, partial);
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

// inner > 1 and len <= kTileRows (a mean over a few heads, or over one): a thread per output adds
// its len elements in order, in double, as sum_columns_kernel's tile would (each of its rows then
// holds one element or none), so the bits are the same; that kernel would give a whole block to
// each of the outer rows.
template <class T>
struct SumShortAxisFn {
  const T* x;  // (outer, len, inner)
  long long len, inner;
  T* out;  // (outer, inner)
  template <class I>
  __device__ void operator()(I r) const {
    const I o = r / static_cast<I>(inner), i = r - o * static_cast<I>(inner);
    const T* base = x + static_cast<long long>(o) * len * inner + i;
    double acc = 0.0;
    for (long long l = 0; l < len; ++l) acc += static_cast<double>(base[l * inner]);
    out[r] = static_cast<T>(acc);
  }
};

template <class T>
struct ExpandFn {
  const T* g;  // (outer, inner)
  long long len, inner;
  T* out;  // (outer, len, inner)
  template <class I>
  __device__ void operator()(I k) const {
    out[k] = g[k / static_cast<I>(len * inner) * static_cast<I>(inner) + k % static_cast<I>(inner)];
  }
};

}  // namespace

// Long axes are split into chunks, one grid row of blocks each, and a second pass adds the chunk
// sums; every summation order is fixed by the shape alone, so runs agree bit for bit.
void sum_axis(const Tensor& x, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  const long long outputs = outer * inner;
  if (outputs == 0) return;
  if (inner > 1 && len <= kTileRows) {
    dispatch_float(x.dtype(), "sum", [&](auto zero) {
      using T = decltype(zero);
      detail::launch_for_each("sum", outputs, SumShortAxisFn<T>{x.data<T>(), len, inner, out.data<T>()});
    });
    return;
  }
  // Short, narrow sums (a bias gradient over Cora's 2,708 rows: 2 column tiles) are split
  // along the axis too, or two blocks would add 340 rows per thread.
  const long long blocks_per_chunk = inner == 1 ? outputs : outer * ((inner + kTileCols - 1) / kTileCols);
  const long long want_chunks = std::max(1LL, kTargetBlocks / blocks_per_chunk);
  const long long chunk_len =
      std::max({kMinChunk, (len + want_chunks - 1) / want_chunks, (len + kMaxGridY - 1) / kMaxGridY});
  const long long chunks = len > chunk_len ? (len + chunk_len - 1) / chunk_len : 1;
  Tensor partial;  // (chunks, outputs) f64, only when the axis is split
  if (chunks > 1) partial = Tensor::empty({chunks, outputs}, DType::f64, Device::cuda, "sum partials");
  double* partial_data = chunks > 1 ? partial.data<double>() : nullptr;
  dispatch_float(x.dtype(), "sum", [&](auto zero) {
    using T = decltype(zero);
    if (inner == 1) {
      const dim3 grid(static_cast<unsigned>(std::min(outputs, kMaxGridX)), static_cast<unsigned>(chunks));
      sum_rows_kernel<T><<<grid, kRowThreads, 0, cuda::stream()>>>(x.data<T>(), outputs, len, chunk_len,
                                                                   chunks, out.data<T>(), partial_data);
      CUDA_CHECK_LAUNCH("sum_rows_kernel");
    } else {
      const long long tiles = outer * ((inner + kTileCols - 1) / kTileCols);
      const dim3 grid(static_cast<unsigned>(std::min(tiles, kMaxGridX)), static_cast<unsigned>(chunks));
      sum_columns_kernel<T><<<grid, dim3(kTileCols, kTileRows), 0, cuda::stream()>>>(
          x.data<T>(), outer, len, inner, chunk_len, chunks, out.data<T>(), partial_data);
      CUDA_CHECK_LAUNCH("sum_columns_kernel");
    }
    // Second pass: each output's chunk sums added in chunk order.
    if (chunks > 1)
      detail::ordered_column_sums<double>("sum chunks", partial_data, chunks, outputs, 1, out.data<T>());
  });
}

void expand_axis(const Tensor& g, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  dispatch_float(g.dtype(), "sum backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("sum backward", outer * len * inner,
                            ExpandFn<T>{g.data<T>(), len, inner, out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
