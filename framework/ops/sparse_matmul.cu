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
//
// With pieces (piece_ptr, piece_row: the transpose's, sparse.h) a block takes a piece instead of
// a row: at most piece_entries of the row's entries, written to out when the row has one piece
// and to row p of piece_sums (pieces, N) when it has more (sparse_piece_sums_kernel adds those).
template <class T>
__global__ void __launch_bounds__(kThreads)
sparse_rows_block_kernel(const int32_t* __restrict__ ptr,        // (R+1,)
                         const int32_t* __restrict__ entry,      // (nnz,) or null for the identity
                         const int32_t* __restrict__ index,      // (nnz,) dense row of each entry
                         const T* __restrict__ values,           // (nnz,)
                         const T* __restrict__ dense,            // (*, N)
                         T* __restrict__ out,                    // (R, N)
                         long long R, long long N,
                         const int32_t* __restrict__ piece_ptr,  // (R+1,) or null: a piece a row
                         const int32_t* __restrict__ piece_row,  // (pieces,) or null
                         long long pieces, int piece_entries,
                         T* __restrict__ piece_sums) {           // (pieces, N) or null
  constexpr int kLanes = 16, kCols = 4, kSlices = kThreads / kLanes, kTile = kLanes * kCols;
  constexpr int kBatch = 4;
  __shared__ T partial[kSlices][kTile];
  const int lane = threadIdx.x % kLanes, slice = threadIdx.x / kLanes;
  const long long items = piece_ptr ? pieces : R;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    long long r = item;
    int begin, end;
    T* dst;
    if (piece_ptr) {
      r = piece_row[item];
      const int first = piece_ptr[r];
      begin = ptr[r] + static_cast<int>(item - first) * piece_entries;
      end = min(begin + piece_entries, ptr[r + 1]);
      dst = piece_ptr[r + 1] - first == 1 ? out + r * N : piece_sums + item * N;
    } else {
      begin = ptr[r], end = ptr[r + 1];
      dst = out + r * N;
    }
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
        dst[j0 + c] = sum;
      }
      __syncthreads();
    }
  }
}

// out[r, j] for the rows r cut into pieces (split_rows): their pieces' sums added in piece order.
template <class T>
struct PieceSumsFn {
  const int32_t* split_rows;  // (splits,)
  const int32_t* piece_ptr;   // (R+1,)
  const T* piece_sums;        // (pieces, N)
  long long N;
  T* out;                     // (R, N)
  __device__ void operator()(long long t) const {
    const long long r = split_rows[t / N], j = t % N;
    const int first = piece_ptr[r], last = piece_ptr[r + 1];
    T sum = piece_sums[first * N + j];
    for (int p = first + 1; p < last; ++p) sum += piece_sums[p * N + j];
    out[r * N + j] = sum;
  }
};

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
      const CsrMatrix* m = a.pieces;
      GAT_CHECK(!m || a.ptr.raw_data() == m->t_row_ptr().raw_data(),
                "sparse_matmul rows: pieces are given for a transpose other than the one summed");
      const long long pieces = m ? m->t_piece_col().numel() : 0, splits = m ? m->t_split_cols().numel() : 0;
      Tensor piece_sums;  // (pieces, N): the split rows' pieces
      if (splits > 0) piece_sums = Tensor::empty({pieces, N}, out.dtype(), Device::cuda, "sparse_matmul piece sums");
      const unsigned blocks = static_cast<unsigned>(std::min<long long>(m ? pieces : R, cuda::kMaxGridBlocks));
      sparse_rows_block_kernel<T><<<blocks, kThreads, 0, cuda::stream()>>>(
          a.ptr.data<int32_t>(), a.entry ? a.entry->data<int32_t>() : nullptr,
          a.index.data<int32_t>(), a.values.data<T>(), dense.data<T>(), out.data<T>(), R, N,
          m ? m->t_piece_ptr().data<int32_t>() : nullptr, m ? m->t_piece_col().data<int32_t>() : nullptr, pieces,
          CsrMatrix::kPieceEntries, splits > 0 ? piece_sums.data<T>() : nullptr);
      CUDA_CHECK_LAUNCH("sparse_matmul rows (block per row)");
      if (splits > 0)
        detail::launch_for_each("sparse_matmul piece sums", splits * N,
                                PieceSumsFn<T>{m->t_split_cols().data<int32_t>(), m->t_piece_ptr().data<int32_t>(),
                                               piece_sums.data<T>(), N, out.data<T>()});
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
