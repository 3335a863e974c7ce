#include <cuda_pipeline.h>

#include <algorithm>

#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/sparse_dropout.h"
#include "gat/framework/ops/sparse_matmul.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// a + b rounded once, never fused with a product the compiler sees behind a or b.
__device__ __forceinline__ float add_rounded(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rounded(double a, double b) { return __dadd_rn(a, b); }

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
    sparse_rows_kernel(const int32_t* __restrict__ ptr,    // (R+1,)
                       const int32_t* __restrict__ entry,  // (nnz,) or null for the identity
                       const int32_t* __restrict__ index,  // (nnz,) dense row of each entry
                       const T* __restrict__ values,       // (nnz,)
                       const T* __restrict__ dense,        // (*, N)
                       T* __restrict__ out,                // (R, N)
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

// The same with a warp per row r (grid-stride over rows), for matrices with few rows, where a
// group of lanes per row would leave the GPU mostly idle. The row's entries are summed as kSlices
// interleaved slices (slice s takes entries begin + s, begin + s + kSlices, ... in order), whose
// partial sums are then added in slice order: a fixed order, so results are reproducible (they
// differ from the CPU's sequential sum by rounding). Lane l holds columns j0 + l + k kWarp,
// k < kCols (a tile of 256 bytes of each dense row a pass over the entries), of every slice.
//
// The warp loads its entries kWarp at a time, a lane each, then copies the dense rows of kStage
// of them at once into its shared memory with cp.async (one load latency for kStage entries, with
// no registers to hold them; each lane copies and reads back its own columns) and adds them. A
// stage whose entries all hold zero (dropped by sparse_dropout) copies nothing.
//
// With pieces (piece_ptr, piece_row: the transpose's, sparse.h) a warp takes a piece instead of
// a row: at most piece_entries of the row's entries, written to out when the row has one piece
// and to row p of piece_sums (pieces, N) when it has more. Then the row's last piece to finish
// (counted in arrivals[r], which it sets back to zero) adds the row's pieces in piece order into
// out (a second launch did this: 3 us of Cora's step).
//
// (A block per row, 16 slices of 16 lanes meeting in shared memory, computed the same sums: the
// same fused multiply-adds in each slice and the same adds of the slices, so the same bits; it
// took 9.1 us for Cora's product in 2.5 waves of blocks, and 8.0 us for its transpose's.)
constexpr int kWarpKernelThreads = 128;
template <class T>
constexpr int kLaneCols = 256 / kWarp / static_cast<int>(sizeof(T));  // a lane's columns of a tile
constexpr int kStage = 16;  // entries whose dense rows are copied at once

// The dropout the forward applies to a's values as it reads them (sparse_dropout_rows): entry e
// of row r, column c holds key.apply(values[e], r * cols + c, keep_scale), written to dropped[e].
template <class T>
struct ReadDropout {
  DropoutKey key;
  T keep_scale;
  unsigned long long cols;
  T* dropped;  // (nnz,)
};

template <class T, bool kDropout>
__global__ void __launch_bounds__(kWarpKernelThreads)
    sparse_rows_warp_kernel(const int32_t* __restrict__ ptr,    // (R+1,)
                            const int32_t* __restrict__ entry,  // (nnz,) or null for the identity
                            const int32_t* __restrict__ index,  // (nnz,) dense row of each entry
                            const T* __restrict__ values,       // (nnz,)
                            const T* __restrict__ dense,        // (*, N)
                            T* __restrict__ out,                // (R, N)
                            long long R, long long N,
                            const int32_t* __restrict__ piece_ptr,  // (R+1,) or null: a piece a row
                            const int32_t* __restrict__ piece_row,  // (pieces,) or null
                            long long pieces, int piece_entries,
                            T* __restrict__ piece_sums,      // (pieces, N) or null
                            int32_t* __restrict__ arrivals,  // (R,) or null, zero
                            const ReadDropout<T> dropout) {  // used when kDropout (rows, no pieces)
  constexpr int kSlices = 16, kCols = kLaneCols<T>, kTile = kCols * kWarp;
  constexpr int kWarps = kWarpKernelThreads / kWarp;
  constexpr unsigned kAll = 0xffffffffu;
  static_assert(kWarp % kStage == 0 && kStage % kSlices == 0, "a stage holds whole rounds of the slices");
  __shared__ T staged[kWarps][kStage][kTile];  // a warp's copied dense rows
  const int lane = threadIdx.x % kWarp;
  T(*stage)[kTile] = staged[threadIdx.x / kWarp];
  DropoutKey key = dropout.key;
  if constexpr (kDropout) key = key.resolved();  // a graph's key reads its stream's base from memory
  const long long items = piece_ptr ? pieces : R;
  const long long warps = static_cast<long long>(gridDim.x) * kWarps;
  for (long long item = blockIdx.x * static_cast<long long>(kWarps) + threadIdx.x / kWarp; item < items;
       item += warps) {
    long long r = item;
    int begin, end, first_piece = 0, row_pieces = 1;
    T* dst;
    if (piece_ptr) {
      r = piece_row[item];
      first_piece = piece_ptr[r], row_pieces = piece_ptr[r + 1] - first_piece;
      begin = ptr[r] + static_cast<int>(item - first_piece) * piece_entries;
      end = min(begin + piece_entries, ptr[r + 1]);
      dst = row_pieces == 1 ? out + r * N : piece_sums + item * N;
    } else {
      begin = ptr[r], end = ptr[r + 1];
      dst = out + r * N;
    }
    for (long long j0 = 0; j0 < N; j0 += kTile) {
      bool in[kCols];  // this lane's columns j0 + lane + k kWarp lie inside the row
#pragma unroll
      for (int k = 0; k < kCols; ++k) in[k] = j0 + lane + k * kWarp < N;
      T part[kSlices][kCols] = {};
      // kWarp entries at a time from begin: entry first + u is in slice u % kSlices.
      for (int first = begin; first < end; first += kWarp) {
        const int p = first + lane;
        T v = T(0);
        int src = 0;
        if (p < end) {
          const int e = entry ? entry[p] : p;
          v = values[e];
          src = index[e];
          if constexpr (kDropout) {
            v = key.apply(v, r * dropout.cols + static_cast<unsigned long long>(src), dropout.keep_scale);
            if (j0 == 0) dropout.dropped[e] = v;
          }
        }
        const unsigned nonzero = __ballot_sync(kAll, v != T(0));
#pragma unroll
        for (int u0 = 0; u0 < kWarp; u0 += kStage) {
          if (((nonzero >> u0) & (kStage == 32 ? kAll : (1u << kStage) - 1)) == 0)
            continue;  // the same for the whole warp
#pragma unroll
          for (int u = 0; u < kStage; ++u) {
            const bool live = __shfl_sync(kAll, v, u0 + u) != T(0);
            const T* row = dense + static_cast<long long>(__shfl_sync(kAll, src, u0 + u)) * N + j0 + lane;
#pragma unroll
            for (int k = 0; k < kCols; ++k)
              if (live && in[k])
                __pipeline_memcpy_async(&stage[u][lane + k * kWarp], row + k * kWarp, sizeof(T));
          }
          __pipeline_commit();
          __pipeline_wait_prior(0);  // this lane's copies have landed
#pragma unroll
          for (int u = 0; u < kStage; ++u) {
            const T vu = __shfl_sync(kAll, v, u0 + u);
            if (vu == T(0)) continue;
#pragma unroll
            for (int k = 0; k < kCols; ++k)
              if (in[k])
                part[(u0 + u) % kSlices][k] =
                    fma(vu, stage[u][lane + k * kWarp], part[(u0 + u) % kSlices][k]);
          }
        }
      }
#pragma unroll
      for (int k = 0; k < kCols; ++k) {
        T sum = part[0][k];
#pragma unroll
        for (int s = 1; s < kSlices; ++s) sum = add_rounded(sum, part[s][k]);
        if (in[k]) dst[j0 + lane + k * kWarp] = sum;
      }
    }
    if (row_pieces == 1) continue;
    __threadfence();  // this lane's piece sums, before the piece is counted
    __syncwarp();
    bool last = false;
    if (lane == 0) {
      last = atomicAdd(&arrivals[r], 1) == row_pieces - 1;
      if (last) arrivals[r] = 0;
    }
    if (!__shfl_sync(kAll, last, 0)) continue;
    __threadfence();
    // The pieces' sums through the L2 (__ldcg), kBatch pieces' loads issued before their adds.
    constexpr int kBatch = 8;
    for (long long j = lane; j < N; j += kWarp) {
      const T* column = piece_sums + first_piece * N + j;
      T sum = __ldcg(column);
      for (int q0 = 1; q0 < row_pieces; q0 += kBatch) {
        T piece[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          piece[u] = q0 + u < row_pieces ? __ldcg(column + (q0 + u) * N) : T(0);
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          if (q0 + u < row_pieces) sum += piece[u];
      }
      out[r * N + j] = sum;
    }
  }
}

// Below this many threads the one-group-per-row kernel leaves the GPU mostly idle (an H200 holds
// 132 x 2048): the warp-per-row kernel is used.
constexpr long long kWarpPerRowBelowThreads = 1 << 18;

// out (nnz,) [e] = g[row[e], :] . b[col[e], :], one thread per entry, j ascending (as the CPU).
template <class T>
struct SparseDotsFn {
  const int32_t* row;  // (nnz,)
  const int32_t* col;  // (nnz,)
  const T* g;          // (M, N)
  const T* b;          // (K, N)
  long long N;
  T* out;  // (nnz,)
  __device__ void operator()(long long e) const {
    const T* gi = g + static_cast<long long>(row[e]) * N;
    const T* bk = b + static_cast<long long>(col[e]) * N;
    T acc = T(0);
    for (long long j = 0; j < N; ++j) acc += gi[j] * bk[j];
    out[e] = acc;
  }
};

// Whether the warp-per-row kernel takes a product of R rows of width N.
bool warp_per_row(long long R, long long N) { return R * lanes_for(N) < kWarpPerRowBelowThreads; }

template <class T, bool kDropout>
void launch_warp_rows(const SparseRows& a, const Tensor& dense, Tensor& out, const ReadDropout<T>& dropout) {
  const long long R = out.size(0), N = out.size(1);
  const CsrMatrix* m = a.pieces;
  GAT_CHECK(!m || a.ptr.raw_data() == m->t_row_ptr().raw_data(),
            "sparse_matmul rows: pieces are given for a transpose other than the one summed");
  const long long pieces = m ? m->t_piece_col().numel() : 0, splits = m ? m->t_split_cols().numel() : 0;
  Tensor piece_sums;  // (pieces, N): the split rows' pieces
  if (splits > 0)
    piece_sums = Tensor::empty({pieces, N}, out.dtype(), Device::cuda, "sparse_matmul piece sums");
  const long long warps_per_block = kWarpKernelThreads / kWarp;
  const unsigned blocks = static_cast<unsigned>(
      std::min<long long>(((m ? pieces : R) + warps_per_block - 1) / warps_per_block, cuda::kMaxGridBlocks));
  sparse_rows_warp_kernel<T, kDropout><<<blocks, kWarpKernelThreads, 0, cuda::stream()>>>(
      a.ptr.data<int32_t>(), a.entry ? a.entry->data<int32_t>() : nullptr, a.index.data<int32_t>(),
      a.values.data<T>(), dense.data<T>(), out.data<T>(), R, N,
      m ? m->t_piece_ptr().data<int32_t>() : nullptr, m ? m->t_piece_col().data<int32_t>() : nullptr, pieces,
      CsrMatrix::kPieceEntries, splits > 0 ? piece_sums.data<T>() : nullptr,
      m ? m->t_piece_arrivals().data<int32_t>() : nullptr, dropout);
  CUDA_CHECK_LAUNCH("sparse_matmul rows (warp per row)");
}

}  // namespace

void sparse_rows(const SparseRows& a, const Tensor& dense, Tensor& out) {
  const long long R = out.size(0), N = out.size(1);
  if (R == 0 || N == 0) return;
  dispatch_float(out.dtype(), "sparse_matmul", [&](auto zero) {
    using T = decltype(zero);
    if (warp_per_row(R, N)) return launch_warp_rows<T, false>(a, dense, out, ReadDropout<T>{});
    const int lanes = lanes_for(N);
    sparse_rows_kernel<T><<<cuda::blocks_for(R * lanes, kThreads), kThreads, 0, cuda::stream()>>>(
        a.ptr.data<int32_t>(), a.entry ? a.entry->data<int32_t>() : nullptr, a.index.data<int32_t>(),
        a.values.data<T>(), dense.data<T>(), out.data<T>(), R, N, lanes);
    CUDA_CHECK_LAUNCH("sparse_matmul rows");
  });
}

void sparse_dropout_rows(const CsrMatrix& a, const DropoutKey& key, double keep_scale, const Tensor& dense,
                         Tensor& out, Tensor& dropped) {
  const long long R = out.size(0), N = out.size(1);
  const SparseRows rows{a.row_ptr(), nullptr, a.col_idx(), dropped};
  if (R == 0 || N == 0 || !warp_per_row(R, N)) {  // many rows: the dropout's kernel, then the product's
    sparse_dropout(a, a.values(), key, keep_scale, dropped);
    return sparse_rows(rows, dense, out);
  }
  dispatch_float(out.dtype(), "sparse_dropout_matmul", [&](auto zero) {
    using T = decltype(zero);
    launch_warp_rows<T, true>({a.row_ptr(), nullptr, a.col_idx(), a.values()}, dense, out,
                              ReadDropout<T>{key, static_cast<T>(keep_scale),
                                             static_cast<unsigned long long>(a.cols()), dropped.data<T>()});
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
