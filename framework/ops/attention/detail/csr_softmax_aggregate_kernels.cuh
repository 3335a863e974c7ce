// The CUDA kernels of csr_softmax_aggregate and of GAT's fused attention, and the host code that
// launches them, shared by the files that compile them (framework/ops/attention/csr_softmax_aggregate*.cu).
// The schedule (online softmax per group of lanes, the chunks of long rows and their merge, the
// two backward passes over the transposed graph and the rows) is described in docs/kernels.md. No
// float atomics anywhere: every sum has a fixed order, so results are bitwise reproducible.
//
// csr_softmax_aggregate's forward and backward (for each dtype), GAT's forward (for each dtype,
// with and without the edge term) and GAT's backward (for each dtype) are instantiated in files of
// their own (csr_softmax_aggregate_forward_f32.cu, csr_softmax_aggregate_backward_f32.cu,
// csr_softmax_aggregate_gat_forward_f32.cu, csr_softmax_aggregate_gat_backward_f32.cu and the
// eleven like them), so that a build compiles them in parallel: in one file with the rest, they
// took 3 minutes on one core, and csr_softmax_aggregate's two files of three dtypes each were
// still 85 and 90 s of a 16-core build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/detail/attention_kernels.cuh"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/detail/graph_kernels.cuh"
#include "gat/framework/ops/elu_dropout.h"

namespace gat::ops::cuda_impl::csr_aggregate {

using warps::kWarp;
using namespace attention;

// Edges whose loads are issued together in the forward: 8 took the 100M-edge layer-1 training
// forward from 11.6 to 16.5 ms (H200, with the shared dropout draws).
constexpr int kUnroll = 4;
// The backward gather: 4 edges per batch and at most 64 registers (4 blocks per SM). On the H200,
// 100M-edge training step, both layers' walks: 2 edges 31.7 ms, 4 edges 30.4 ms, 4 edges at 80
// registers (3 blocks) 31.0 ms. Before the dropout draws were shared (each lane drew a Philox
// block per edge) 4 edges were no faster than 2 (1M nodes / 16M edges: 2.80 ms at H=1, F=64 and
// 3.17 ms at H=8, F=8 for both).
constexpr int kUnrollBackward = 4;
// A lane of 32 bytes (8 floats, with_gather_vec) keeps as many bytes in flight with half the
// edges a batch; a lane of 8 bf16 reads 16 bytes, as a float4 lane does.
template <class S, int VEC>
constexpr int kUnrollOf = sizeof(S) * VEC > 16 ? kUnroll / 2 : kUnroll;
template <class S, int VEC>
constexpr int kUnrollBackwardOf = sizeof(S) * VEC > 16 ? kUnrollBackward / 2 : kUnrollBackward;
// Where the scores come from. row(i, h) gives the score function of row i's edges for head h,
// score(e, j) for edge e from source j.
// S is the scores' storage, the score returned is Compute<S>.
// csr_softmax_aggregate's scores, stored (E, H).
template <class S>
struct StoredScores {
  static constexpr bool kGenericGroups = false;  // group_compiled's groups have kernels of their own
  const S* __restrict__ s;                       // (E, H)
  int H;
  struct Row {
    const S* __restrict__ s;
    int H, h;
    __device__ __forceinline__ Compute<S> operator()(long long e, int32_t) const {
      return widen(s[e * H + h]);
    }
  };
  __device__ __forceinline__ Row row(long long, int h) const { return {s, H, h}; }
};

// GAT's scores, LeakyReLU(el[j,h] + er[i,h] (+ term[e,h] with kTerm)), computed where the edge is
// visited; the training forward also asks whether the LeakyReLU's argument is positive (d er's
// positive sums). kTerm is a template argument so that the kernels without an edge term are those
// measured before it existed (a null check per edge cost about 5% at 100M edges). el and er are
// Compute<S>, per-node statistics as lse is (f32 beside bf16 rows: rounding them moves scores
// across the LeakyReLU's kink, docs/precision.md); the edge term is per edge, of S.
template <class S, bool kTerm>
struct GatScores {
  using T = Compute<S>;
  static constexpr bool kGenericGroups = kTerm;  // with the edge term (in no benchmark): kG = 0 only
  const T* __restrict__ el;                      // (Ns, el_stride): el[j,h] at j * el_stride + h
  const T* __restrict__ er;                      // (Nd, H)
  const S* __restrict__ term;                    // (E, H) or null
  int H;
  T slope;        // negative_slope
  int el_stride;  // H, or a packed source row's length (kPackedRow)
  struct Row {
    const T* __restrict__ el;
    const S* __restrict__ term;
    T er_ih;
    int H, h, el_stride;
    T slope;
    // The score of edge e from source j, and whether its LeakyReLU argument is positive. (A
    // 32-bit j times the stride is one wide multiply; a 64-bit one is three.)
    __device__ __forceinline__ T operator()(long long e, int32_t j, bool& positive) const {
      T x = el[static_cast<long long>(j) * el_stride + h] + er_ih;
      if constexpr (kTerm) x += widen(term[e * H + h]);
      positive = x > T(0);
      return positive ? x : x * slope;
    }
    __device__ __forceinline__ T operator()(long long e, int32_t j) const {
      bool positive;
      return (*this)(e, j, positive);
    }
  };
  __device__ __forceinline__ Row row(long long i, int h) const {
    return {el, term, er[i * H + h], H, h, el_stride, slope};
  }
};

// Runs the online softmax of one lane over edges [begin, end) of a row, with the row's score
// function `score` (of its head); with kPositive also the sums over the edges whose LeakyReLU
// argument is positive (GatScores only). The group's G lanes (heads [h0, h1]) draw the dropout
// decisions together (`keep`), a window of edges at a time. Source j's values are V[j * v_stride
// + (h, f)]: v_stride is H F, or a packed source row's length.
template <class S, int VEC, bool kPositive, class Score>
__device__ __forceinline__ void gather_softmax(const int32_t* __restrict__ src,  // (E,)
                                               const Score& score,
                                               const S* __restrict__ V,  // (N, v_stride)
                                               long long begin, long long end, int H, int v_stride, int h,
                                               int c, int h0, int h1, SegmentKeep& keep, Compute<S> scale,
                                               OnlineState<Compute<S>, VEC, kPositive>& st) {
  using T = Compute<S>;
  auto score_of = [&](long long e, int32_t j, bool& positive) {
    if constexpr (kPositive) {
      return score(e, j, positive);
    } else {
      positive = false;
      return score(e, j);
    }
  };
  constexpr int kUnroll = kUnrollOf<S, VEC>;
  for (long long window_begin = begin; window_begin < end;) {
    const ConsecutiveEdges window(keep, window_begin, end, H, h0, h1);
    long long e = window.begin;
    for (; e + kUnroll <= window.end; e += kUnroll) {
      int32_t j[kUnroll];
      T s[kUnroll];
      bool positive[kUnroll];
      Vec<T, VEC> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) j[u] = src[e + u];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) s[u] = score_of(e + u, j[u], positive[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        v[u] = load_row<S, VEC>(V + static_cast<long long>(j[u]) * v_stride + c);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) st.add(s[u], window.factor(keep, e + u, h, scale), v[u], positive[u]);
    }
    for (; e < window.end; ++e) {
      const int32_t j = src[e];
      bool positive;
      const T s = score_of(e, j, positive);
      st.add(s, window.factor(keep, e, h, scale),
             load_row<S, VEC>(V + static_cast<long long>(j) * v_stride + c), positive);
    }
    window_begin = window.end;
  }
}

// The lane's column c of a row's H*F columns in tile `tile` and the heads [h0, h1] of its group's
// tile (G lanes). A lane past the last column (HF not a multiple of G * VEC) takes the last
// vector's column: it follows the group (the dropout draws are shared) and writes nothing
// (`writes`).
template <int VEC>
struct RowTile {
  int c, h, h0, h1;
  bool writes;
  __device__ __forceinline__ RowTile(int tile, int lane, int G, int F, int HF) {
    const int first = tile * G * VEC;
    c = first + lane * VEC;
    writes = c < HF;
    if (!writes) c = HF - VEC;
    h = c / F;
    h0 = first / F;
    h1 = (min(HF, first + G * VEC) - 1) / F;
  }
};

// The long rows' chunks as the forward kernel takes them (Graph::row_chunk_ptr, row_chunk_row):
// each chunk's partial online-softmax state, merged in chunk order by aggregate_merge_kernel.
template <class T>
struct ForwardChunks {
  ChunkRows rows{};       // W = rows.chunks chunks
  int chunk = 0;          // edges a chunk
  T* part_m = nullptr;    // (W, H)
  T* part_z = nullptr;    // (W, H)
  T* part_acc = nullptr;  // (W, H, F)
};

// One group of G lanes (kG, or with kG = 0 the launch argument `lanes`: group_compiled) per
// (uncut row, column tile), the rows in Graph::row_order (longest first: the groups
// of a warp take rows of about one length, where in index order a warp of 16 groups ran as long
// as the longest of 16 rows of the graph's skewed degrees), and one group per (chunk of a long
// row, column tile), writing the chunk's partial state (with kPositive also the positive sums'
// partials, pos.part_z and pos.part_acc): kItems says which a launch runs (Items::both: the first
// split.first_blocks blocks take the chunks). With kPositive also pos_out and pos_weight
// (pos.out, pos.weight).
template <class S, int VEC, int kG, bool kPositive, Items kItems, class Scores>
__global__ void __launch_bounds__(kThreads)
    aggregate_forward_kernel(const int32_t* __restrict__ row_ptr,    // (N+1,)
                             const int32_t* __restrict__ row_order,  // (rows,)
                             const int32_t* __restrict__ src,        // (E,)
                             Scores scores,
                             const S* __restrict__ V,       // (N, v_stride)
                             S* __restrict__ out,           // (N, H, F)
                             Compute<S>* __restrict__ lse,  // (N, H)
                             PositiveParts<S> pos, long long rows, int H, int F, int v_stride, int tiles,
                             int lanes, DropoutKey key, Compute<S> scale, OutputEpilogue<Compute<S>> epilogue,
                             ForwardChunks<Compute<S>> parts = {}, GridSplit split = {}) {
  using T = Compute<S>;
  const int G = kG > 0 ? kG : lanes;
  SegmentKeep keep(key, G);
  const int HF = H * F;
  if constexpr (kItems != Items::rows) {
    if (kItems == Items::chunks || split.in_first()) {
      const GroupLane g = kItems == Items::chunks ? GroupLane(G) : split.lanes(G);
      const long long items = parts.rows.chunks * tiles;
      for (long long item = g.first_item + g.group; item < items; item += g.stride) {
        const long long w = tiles == 1 ? item : item / tiles;
        const RowTile<VEC> t(static_cast<int>(item - w * tiles), g.lane, G, F, HF);
        const ChunkRange r = find_chunk(row_ptr, parts.rows.ptr, parts.rows.row, w, parts.chunk);
        OnlineState<T, VEC, kPositive> st;
        gather_softmax<S, VEC, kPositive>(src, scores.row(r.row, t.h), V, r.begin, r.end, H, v_stride, t.h,
                                          t.c, t.h0, t.h1, keep, scale, st);
        if (!t.writes) continue;
        store_vec<T, VEC>(parts.part_acc + w * HF + t.c, to_vec(st.acc));
        if constexpr (kPositive) store_vec<T, VEC>(pos.part_acc + w * HF + t.c, to_vec(st.acc_pos));
        if (t.c % F == 0) {
          parts.part_m[w * H + t.h] = st.m;
          parts.part_z[w * H + t.h] = st.z;
          if constexpr (kPositive) pos.part_z[w * H + t.h] = st.z_pos;
        }
      }
      return;
    }
  }
  const GroupLane g = kItems == Items::both ? split.lanes(G) : GroupLane(G);
  const long long items = rows * tiles;
  for (long long item = g.first_item + g.group; item < items; item += g.stride) {
    const long long r = tiles == 1 ? item : item / tiles;  // (a 64-bit division: ~70 instructions)
    const RowTile<VEC> t(static_cast<int>(item - r * tiles), g.lane, G, F, HF);
    const long long i = row_order[r];
    const long long begin = row_ptr[i], end = row_ptr[i + 1];
    OnlineState<T, VEC, kPositive> st;
    gather_softmax<S, VEC, kPositive>(src, scores.row(i, t.h), V, begin, end, H, v_stride, t.h, t.c, t.h0,
                                      t.h1, keep, scale, st);
    if (!t.writes) continue;
    write_row<S, VEC>(out, lse, i, H, F, t.h, t.c, st.m, st.z, st.acc, epilogue, pos);
    if constexpr (kPositive)
      write_positive_row<S, VEC>(pos, i, H, F, t.h, t.c, st.z, st.z_pos, st.acc_pos, st.acc);
  }
}

// The tensors of the backward walk over the transposed graph that both ops read (S: the rows').
template <class S>
struct BackwardArgs {
  using T = Compute<S>;
  const int32_t* t_row_ptr;  // (N+1,) transposed CSR: the out-edges of each source
  const int32_t* t_dst;      // (E,) destination of each transposed entry
  const int32_t* t_edge_id;  // (E,) edge id of each transposed entry
  const S* V;                // (N, H, F) node values
  const S* grad_out;         // (N, H, F), its rows grad_stride values apart
  int grad_stride;           // H F, or a packed row's length (RowPack with the gradient)
  S* dV;                     // (N, H, F), or null when d values are not asked
  long long N, E;            // N: the graph's sources (rows of the transpose)
  int H, F, tiles;           // tiles: feature tiles of one head
  int G;                     // lanes a (source, head, tile): Tiling(F, VEC).G (with_compiled_group)
  DropoutKey key;
  T scale;
};

// What each op does with an edge of the walk besides dV. grad.walk(j, h, tile, E) gives the state
// of one (source j, head h, feature tile) with
//   needs_weight(dV): whether the walk needs a[e,h] (the softmax weight without dropout);
//   load(e, i, weight): an Entry, what the edge's weight and use read of the destination i and
//                     the edge e (issued with the gather of G[i], so that one memory latency
//                     serves a batch of entries; nothing when the weight is not needed and the
//                     op's use reads nothing);
//   weight(entry):    a[e,h] = exp(s[e,h] - lse[i,h]);
//   wants_dot():      whether da = keep/(1-p) G[i,h,:].V[j,h,:] is needed;
//   edge(e, entry, a, da, first_lane): its use of da (the group's first lane writes);
//   sum:              what the walk sums over j's out-edges ((N, H) per source, merged by chunks).
// kBlocksPerSM bounds the walk kernels' registers (256 threads per block).
// csr_softmax_aggregate: this tile's part of da, for row_softmax_grad_kernel. No sum.
template <class S>
struct ScoreGrad {
  using T = Compute<S>;
  static constexpr int kBlocksPerSM = 4;  // at most 64 registers
  const S* s;                             // (E, H)
  const T* lse;                           // (N, H)
  T* da;             // (tiles, E, H) per-tile parts of da, or null when d scores are not asked
  T* sum = nullptr;  // always null: this op sums nothing over a source
  T* part_sum = nullptr;
  struct Walk {
    const S* __restrict__ s;
    const T* __restrict__ lse;
    T* da_tile;  // (E, H) or null
    int H, h;
    T sum = 0;
    struct Entry {
      T s, lse;
    };
    __device__ __forceinline__ bool needs_weight(bool dV) const { return dV; }
    __device__ __forceinline__ bool wants_dot() const { return da_tile != nullptr; }
    __device__ __forceinline__ Entry load(int32_t e, int32_t i, bool weight) const {
      if (!weight) return {};
      return {widen(s[static_cast<long long>(e) * H + h]), lse[static_cast<long long>(i) * H + h]};
    }
    __device__ __forceinline__ T weight(const Entry& x) const { return exp(x.s - x.lse); }
    __device__ __forceinline__ void edge(long long e, const Entry&, T, T da, bool first_lane) {
      if (first_lane) da_tile[e * H + h] = da;
    }
  };
  __device__ __forceinline__ Walk walk(long long, int h, int tile, long long E, int H) const {
    return {s, lse, da ? da + tile * E * H : nullptr, H, h};
  }
};

// gat_attention_aggregate: the score recomputed from el[j], er[i] (and term[e]), ds = a (da - D[i])
// with D[i,h] = G[i,h,:].out[i,h,:] (= sum over row i of a da), g = ds LeakyReLU'(el[j] + er[i]
// (+ term[e])); g is summed over j's out-edges into d el and, with an edge term whose gradient is
// asked, written per edge (it is d term). d er needs no edge: head_rows_dot_kernel's RowDer.
// er, lse and D of destination i, head h are at [i * stride + h] of their pointers (RowPack's
// rows). kTerm as GatScores'.
// er, lse and D are RowPack's rows, of Compute<S>; el and d el are Compute<S> too (GatScores).
template <class S, bool kTerm>
struct GatGrad {
  using T = Compute<S>;
  // As ScoreGrad: 3 blocks per SM (80 registers) measured 60.3 ms against 54.4 ms for the two
  // layers' walks on the 100M-edge graph.
  static constexpr int kBlocksPerSM = 4;
  const T* el;    // (Ns, H)
  const T* er;    // (Nd, stride)
  const S* term;  // (E, H) or null
  const T* lse;   // (Nd, stride)
  const T* D;     // (Nd, stride)
  int stride;
  S* g;  // (E, H) d term, or null (always without kTerm)
  T slope;
  T* sum;       // (Ns, H) d el, or null
  T* part_sum;  // (W, H) d el of each chunk of a long transposed row (chunk kernel only)
  struct Walk {
    const T* __restrict__ er;
    const S* __restrict__ term;
    const T* __restrict__ lse;
    const T* __restrict__ D;
    int stride;
    S* g;
    T el_j, slope;
    int H, h;
    T sum = 0;
    // Of edge e = (j -> i): the LeakyReLU's argument x, lse[i,h] and D[i,h].
    struct Entry {
      T x, lse, D;
    };
    __device__ __forceinline__ bool needs_weight(bool) const { return true; }
    __device__ __forceinline__ bool wants_dot() const { return true; }
    __device__ __forceinline__ Entry load(int32_t e, int32_t i, bool) const {
      const long long at = static_cast<long long>(i) * stride + h;
      T x = el_j + er[at];
      if constexpr (kTerm) x += widen(term[static_cast<long long>(e) * H + h]);
      return {x, lse[at], D[at]};
    }
    __device__ __forceinline__ T weight(const Entry& p) const {
      return exp((p.x > T(0) ? p.x : p.x * slope) - p.lse);
    }
    __device__ __forceinline__ void edge(long long e, const Entry& p, T a, T da, bool first_lane) {
      const T ds = a * (da - p.D);
      const T grad = p.x > T(0) ? ds : ds * slope;
      sum += grad;
      if constexpr (kTerm) {
        if (first_lane && g) g[e * H + h] = narrow<S>(grad);
      }
    }
  };
  __device__ __forceinline__ Walk walk(long long j, int h, int, long long, int H) const {
    return {er, term, lse, D, stride, g, el[j * H + h], slope, H, h};
  }
};

// The lane's part of G[i,h,:].V[j,h,:]: its VEC products added in order, and a lane of 8 values
// adds its two halves' sums as group_sum adds two lanes of 4 (the same bits either way).
template <class T, int VEC>
__device__ __forceinline__ T lane_dot(const Vec<T, VEC>& v, const Vec<T, VEC>& g) {
  static_assert(VEC <= 4 || VEC == 8, "lanes of at most 4 values, or of 8 as two of 4");
  constexpr int kPart = VEC <= 4 ? VEC : 4;
  T part[VEC / kPart] = {};
#pragma unroll
  for (int q = 0; q < VEC; ++q) part[q / kPart] += v.v[q] * g.v[q];
  if constexpr (VEC == 8) return part[0] + part[1];
  return part[0];
}

// The walk for one group of G lanes over transposed entries [begin, end) of source j, head h;
// the lane owns features [c, c + VEC) of the head (none when c >= F: it still joins the sums).
// For each entry (edge e, destination i), in t_row order:
//   acc += a~[e,h] * G[i,h,c..c+VEC)    with a~ = a * keep/(1-p)       (when dV is asked)
//   walk.edge(e, i, a, da)              with da = keep/(1-p) * G[i,h,:].V[j,h,:]
// One gather of G serves both. kUnrollBackward entries' loads are issued together and their dots
// reduced together. The segment's lanes (heads [h0, h1]; SourceSegment) draw the dropout
// decisions together (`keep`), a window of entries at a time. G is the group's lanes, or 0: a.G
// (the generic walk, with_compiled_group).
template <class S, int VEC, int G, class Walk>
__device__ __forceinline__ void gather_attention_grad(const BackwardArgs<S>& a, long long j, long long begin,
                                                      long long end, int h, int c, int h0, int h1,
                                                      SegmentKeep& keep, Walk& walk, Compute<S> (&acc)[VEC]) {
  using T = Compute<S>;
  const int H = a.H;
  const bool lane_has_features = c < a.F;
  const bool want_weight = walk.needs_weight(a.dV != nullptr), want_dot = walk.wants_dot();
  const int head_offset = h * a.F + c;  // within a node's H*F
  const int HF = H * a.F;
  Vec<T, VEC> v{};  // V[j, h, c..c+VEC)
  if (want_dot && lane_has_features) v = load_row<S, VEC>(a.V + j * HF + head_offset);
  auto entries = [&](const ScatteredEdges& window, long long k, auto count) {
    constexpr int U = decltype(count)::value;
    int32_t e[U], i[U];  // edge id and destination (64-bit offsets are formed at each use)
    Vec<T, VEC> g[U];
    typename Walk::Entry x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) e[u] = a.t_edge_id[k + u], i[u] = a.t_dst[k + u];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      g[u] = Vec<T, VEC>{};
      if (lane_has_features)
        g[u] = load_row<S, VEC>(a.grad_out + static_cast<long long>(i[u]) * a.grad_stride + head_offset);
      x[u] = walk.load(e[u], i[u], want_weight);
    }
    T w[U];
#pragma unroll
    for (int u = 0; u < U; ++u) w[u] = want_weight ? walk.weight(x[u]) : T(0);
    T drop[U], dot[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      drop[u] = window.factor(keep, k + u, e[u], h, a.scale);
      if (a.dV) {
        const T kept = w[u] * drop[u];
#pragma unroll
        for (int q = 0; q < VEC; ++q) acc[q] += kept * g[u].v[q];
      }
      dot[u] = lane_dot(v, g[u]);
    }
    if (!want_dot) return;
    if constexpr (G > 0) {
#pragma unroll
      for (int u = 0; u < U; ++u) dot[u] = warps::group_sum<G>(dot[u]);
    } else {  // group_sum's butterfly over a.G lanes, a step for all U dots at a time
      const unsigned mask = (a.G == kWarp ? 0xffffffffu : (1u << a.G) - 1)
                            << ((threadIdx.x % kWarp) & ~(a.G - 1));
      for (int offset = a.G / 2; offset > 0; offset /= 2)
#pragma unroll
        for (int u = 0; u < U; ++u) dot[u] += __shfl_xor_sync(mask, dot[u], offset);
    }
    const bool first_lane = threadIdx.x % (G > 0 ? G : a.G) == 0;
#pragma unroll
    for (int u = 0; u < U; ++u) walk.edge(e[u], x[u], w[u], dot[u] * drop[u], first_lane);
  };
  for (long long window_begin = begin; window_begin < end;) {
    const ScatteredEdges window(keep, a.t_edge_id, window_begin, end, H, h0, h1);
    long long k = window.begin;
    for (; k + kUnrollBackwardOf<S, VEC> <= window.end; k += kUnrollBackwardOf<S, VEC>)
      entries(window, k, Int<kUnrollBackwardOf<S, VEC>>{});
    for (; k < window.end; ++k) entries(window, k, Int<1>{});
    window_begin = window.end;
  }
}

// The lanes of a backward walk that visit the same source's entries together: the groups of all
// its heads (and tiles) when they fill an aligned power of two of the warp (8 heads of 2 lanes),
// else the group alone. Items are (source, head, tile) in that order, so a source's groups are
// consecutive in the warp.
struct SourceSegment {
  int width;
  bool all_heads;
  __device__ __forceinline__ static SourceSegment of(int G, int H, int tiles) {
    const int lanes = H * tiles * G;
    if (lanes <= kWarp && (lanes & (lanes - 1)) == 0) return {lanes, true};
    return {G, false};
  }
  __device__ __forceinline__ int first_head(int h) const { return all_heads ? 0 : h; }
  __device__ __forceinline__ int last_head(int h, int H) const { return all_heads ? H - 1 : h; }
};

// Where a backward work item sits: item = (node or chunk n, head h, tile) -> the lane's feature c
// within the head. Divides in 32 bits while the item fits (64-bit divisions are long software
// routines, and every lane of a group of 2 does them at H = 8, F = 8).
struct HeadItem {
  long long n;
  int h, tile, c;
  template <int VEC>
  __device__ __forceinline__ static HeadItem of(long long item, int H, int tiles, int G, int lane) {
    return item < (1LL << 32) ? split<VEC, uint32_t>(item, H, tiles, G, lane)
                              : split<VEC, unsigned long long>(item, H, tiles, G, lane);
  }
  template <int VEC, class I>
  __device__ __forceinline__ static HeadItem split(I item, I H, I tiles, int G, int lane) {
    HeadItem x;
    const I nh = item / tiles;
    x.tile = static_cast<int>(item - nh * tiles);
    const I n = nh / H;
    x.n = static_cast<long long>(n);
    x.h = static_cast<int>(nh - n * H);
    x.c = (x.tile * G + lane) * VEC;
    return x;
  }
};

// The long transposed rows' chunks as the backward walk takes them (Graph::t_row_chunk_ptr,
// t_row_chunk_row): each chunk's partial dV and sum, merged in chunk order by
// value_grad_merge_kernel.
template <class T>
struct BackwardChunks {
  ChunkRows rows{};       // W = rows.chunks chunks
  int chunk = 0;          // edges a chunk
  T* part_acc = nullptr;  // (W, H, F) or null
};

// Backward (1): one group per (uncut source j, head, feature tile) over the transposed graph,
// writing dV[j,h,c..], the op's per-edge values and its sum over j's out-edges. The sources are
// taken in Graph::t_row_order (longest first, as the forward's rows). And one group per (chunk w
// of a long transposed row, head, feature tile): the chunk's partial dV and sum, and the per-edge
// values of its edges. kItems says which a launch runs (Items::both: the first
// split.first_blocks blocks take the chunks). A group is G lanes, or with G = 0 a.G (the generic
// walk, with_compiled_group).
template <class S, int VEC, int G, Items kItems, class Grad>
__global__ void __launch_bounds__(kThreads, Grad::kBlocksPerSM)
    attention_grad_kernel(BackwardArgs<S> a, Grad grad,
                          const int32_t* __restrict__ source_order,  // (sources,)
                          long long sources, BackwardChunks<Compute<S>> parts = {}, GridSplit split = {}) {
  using T = Compute<S>;
  const int lanes = G > 0 ? G : a.G;
  const SourceSegment segment = SourceSegment::of(lanes, a.H, a.tiles);
  SegmentKeep keep(a.key, segment.width);
  if constexpr (kItems != Items::rows) {
    if (kItems == Items::chunks || split.in_first()) {
      const GroupLane g = kItems == Items::chunks ? GroupLane(lanes) : split.lanes(lanes);
      const long long items = parts.rows.chunks * a.H * a.tiles;
      for (long long item = g.first_item + g.group; item < items; item += g.stride) {
        const HeadItem x = HeadItem::of<VEC>(item, a.H, a.tiles, lanes, g.lane);
        const ChunkRange r = find_chunk(a.t_row_ptr, parts.rows.ptr, parts.rows.row, x.n, parts.chunk);
        T acc[VEC] = {};
        auto walk = grad.walk(r.row, x.h, x.tile, a.E, a.H);
        gather_attention_grad<S, VEC, G>(a, r.row, r.begin, r.end, x.h, x.c, segment.first_head(x.h),
                                         segment.last_head(x.h, a.H), keep, walk, acc);
        if (parts.part_acc && x.c < a.F)
          store_vec<T, VEC>(parts.part_acc + (x.n * a.H + x.h) * a.F + x.c, to_vec(acc));
        if (grad.part_sum && g.lane == 0) grad.part_sum[x.n * a.H + x.h] = walk.sum;
      }
      return;
    }
  }
  const GroupLane g = kItems == Items::both ? split.lanes(lanes) : GroupLane(lanes);
  const long long items = sources * a.H * a.tiles;
  for (long long item = g.first_item + g.group; item < items; item += g.stride) {
    const HeadItem x = HeadItem::of<VEC>(item, a.H, a.tiles, lanes, g.lane);
    const long long j = source_order[x.n];
    const long long begin = a.t_row_ptr[j], end = a.t_row_ptr[j + 1];
    T acc[VEC] = {};
    auto walk = grad.walk(j, x.h, x.tile, a.E, a.H);
    gather_attention_grad<S, VEC, G>(a, j, begin, end, x.h, x.c, segment.first_head(x.h),
                                     segment.last_head(x.h, a.H), keep, walk, acc);
    if (a.dV && x.c < a.F) store_row<S, VEC>(a.dV + (j * a.H + x.h) * a.F + x.c, to_vec(acc));
    if (grad.sum && g.lane == 0) grad.sum[j * a.H + x.h] = walk.sum;
  }
}

// Backward (2): d scores from the da parts of (1), a warp per (destination row, block of heads)
// (warps::HeadLanes: all the row's heads at once when H divides 32):
//   da = sum of the tiles' parts (in tile order), r = sum_e a*da (fixed butterfly over the lanes
//   of a head), then ds = a*(da - r) with a = exp(s - lse).
// Where ds is Compute<S> (f32, f64), da's parts are ds itself at one tile and their sum goes
// there at several; bf16 ds keeps da in f32 parts of its own and sums them again.
template <class S>
__global__ void __launch_bounds__(kThreads) row_softmax_grad_kernel(
    const int32_t* __restrict__ row_ptr,  // (N+1,)
    const S* __restrict__ s,              // (E, H)
    const Compute<S>* __restrict__ lse,   // (N, H)
    const Compute<S>* da,  // (tiles, E, H); tile 0 is ds itself when tiles == 1 and S is Compute<S>
    S* ds,                 // (E, H)
    long long N, long long E, int H, int tiles) {
  using T = Compute<S>;
  constexpr bool kDaInDs = std::is_same_v<S, T>;
  const warps::HeadLanes heads(H, threadIdx.x % kWarp);
  const long long EH = E * H;
  auto da_of = [&](long long x) {  // the tiles' parts added in tile order
    T d = da[x];
    for (int t = 1; t < tiles; ++t) d += da[t * EH + x];
    return d;
  };
  for (long long w = warps::warp_id(); w < N * heads.blocks; w += warps::warp_count()) {
    long long i;
    int h;
    heads.item(w, i, h);
    const long long begin = row_ptr[i] + heads.first, end = row_ptr[i + 1];
    const T l = lse[i * H + h];
    T r = 0;
    for (long long e = begin; e < end; e += heads.stride) {
      const long long x = e * H + h;
      const T d = da_of(x);
      if constexpr (kDaInDs)
        if (tiles > 1) ds[x] = d;
      r += exp(widen(s[x]) - l) * d;
    }
    r = heads.sum(r);
    for (long long e = begin; e < end; e += heads.stride) {
      const long long x = e * H + h;
      const T d = kDaInDs ? widen(ds[x]) : da_of(x);
      ds[x] = narrow<S>(exp(widen(s[x]) - l) * (d - r));
    }
  }
}

// One warp per (row, head): lse by a max and a sum sweep, then (when a is given) the weights.
template <class S, class Scores>
__global__ void __launch_bounds__(kThreads)
    row_softmax_kernel(const int32_t* __restrict__ row_ptr,  // (N+1,)
                       const int32_t* __restrict__ src,      // (E,)
                       Scores scores,
                       S* __restrict__ a,             // (E, H) or null
                       Compute<S>* __restrict__ lse,  // (N, H) or null
                       long long NH, int H) {
  using T = Compute<S>;
  const int lane = threadIdx.x % kWarp;
  for (long long w = warps::warp_id(); w < NH; w += warps::warp_count()) {
    const long long i = w / H;
    const int h = static_cast<int>(w - i * H);
    const auto score = scores.row(i, h);
    const long long begin = row_ptr[i], end = row_ptr[i + 1];
    T m = -INFINITY;
    for (long long e = begin + lane; e < end; e += kWarp) m = fmax(m, score(e, src[e]));
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      m = fmax(m, __shfl_xor_sync(0xffffffffu, m, offset));
    T z = 0;
    for (long long e = begin + lane; e < end; e += kWarp) z += exp(score(e, src[e]) - m);
    z = warps::group_sum<kWarp>(z);
    if (lse && lane == 0) lse[w] = z > T(0) ? m + log(z) : -INFINITY;
    if (a)  // from (m, z), not lse, as on the CPU: lse rounds to ulp(m)
      for (long long e = begin + lane; e < end; e += kWarp)
        a[e * H + h] = narrow<S>(exp(score(e, src[e]) - m) / z);
  }
}

// ---- host side -------------------------------------------------------------------------

// Whether the forward (aggregate_forward_kernel) or, with kWalk, the backward walk
// (attention_grad_kernel) of rows S and lanes of VEC values has a kernel of its own for groups of
// G lanes (Tiling(H F, VEC).G, or for the walk Tiling(F, VEC).G); else it runs the generic kernel
// (G = 0), which takes G at launch. The walk sums each edge's dot product across the group by an
// unrolled butterfly (warps::group_sum<G>); the forward sums nothing across lanes, but with G at
// launch ptxas spilled registers in kernels that spilled none before (at 8 heads of 8 f32
// features: 12 bytes in the 100M-edge graph's evaluation forward, 24 in Cora's training forward).
// Each G is a kernel for each VEC, kind of items, option and op, so only the groups of the
// benchmarked shapes have their own:
//  - f32 lanes of 8 values (a head of 8, the paper's first layer on a large graph): G = 8 in the
//    forward (8 heads), G = 1 in the walk (the only one it takes);
//  - f32 lanes of 4: G = 2, 16, 32 (8, 64, 128 and more values: a head in the walk, a row in the
//    forward; Cora's first layer, the 100M-edge graph's output layer);
//  - f32 single values: G = 4, 8, 32 (3; 5 to 7, Cora's and CiteSeer's classes; from 17, such
//    as PPI's 121 labels);
//  - bf16 lanes of 8: G = 1, 8, 16, 32 (8, 64, 128, 256 values); pairs G = 4 (6: CiteSeer's
//    classes); single values G = 8 (5, 7: Cora's classes);
//  - f64 (the finite-difference checks' dtype, where speed does not matter): none.
template <class S, int VEC, bool kWalk>
constexpr bool group_compiled(int G) {
  if constexpr (std::is_same_v<S, float>) {
    if constexpr (VEC == 8) return G == (kWalk ? 1 : 8);
    if constexpr (VEC == 4) return G == 2 || G == 16 || G == kWarp;
    return G == 4 || G == 8 || G == kWarp;
  } else if constexpr (std::is_same_v<S, bf16>) {
    if constexpr (VEC == 8) return G == 1 || G == 8 || G == 16 || G == kWarp;
    if constexpr (VEC == 2) return G == 4;
    return G == 8;
  } else {
    return false;
  }
}

// Calls f(Int<G>{}) with the kernel for groups of G lanes: its own where group_compiled, else the
// generic kernel's (Int<0>), which also takes every G when kGeneric (GAT with an edge term:
// GATConv with edge_dim, in no benchmark). The generic kernels do the same float operations in
// the same order (the walk's butterfly looped over a runtime G), so the bits are the same.
template <class S, int VEC, bool kWalk, bool kGeneric, class Fn>
void with_compiled_group(int G, Fn&& f) {
  if constexpr (kGeneric) {
    f(Int<0>{});
  } else {
    with_group(G, [&](auto group) {
      if constexpr (group_compiled<S, VEC, kWalk>(decltype(group)::value))
        f(group);
      else
        f(Int<0>{});
    });
  }
}

// The launches of a kernel that takes uncut rows and long rows' chunks (GridSplit), of the graph
// or with `transposed` of its transpose: rows_alone() where no row is longer than the graph's
// chunk. Else the long rows' chunks planned into `parts` (rows, chunk), partials(chunks) to
// allocate their partial state, and launch_chunks(items, blocks, split) to launch them: with the uncut
// rows' `row_blocks` (Items::both) where both grids fit the device at once, else after
// rows_alone(). `chunk_groups`: the groups of G lanes a chunk takes. Returns whether chunks ran
// (their partials to merge).
template <class Parts, class RowsAlone, class Partials, class LaunchChunks>
bool launch_rows_and_chunks(const Graph& graph, bool transposed, int G, unsigned row_blocks,
                            long long chunk_groups, Parts& parts, RowsAlone&& rows_alone, Partials&& partials,
                            LaunchChunks&& launch_chunks) {
  const int chunk = graph.chunk_edges();
  const bool split = (transposed ? graph.max_out_degree() : graph.max_in_degree()) > chunk;
  if (!split) {
    rows_alone();
    return false;
  }
  parts.rows = chunk_rows(graph, transposed);
  parts.chunk = chunk;
  partials(parts.rows.chunks);
  const unsigned chunk_blocks = group_blocks(parts.rows.chunks * chunk_groups, G);
  const bool together = launch_together(chunk_blocks, row_blocks);
  if (!together) rows_alone();
  with_items(together, [&](auto items) {
    launch_chunks(items, chunk_blocks + (together ? row_blocks : 0), GridSplit{chunk_blocks});
  });
  return true;
}

// The forward of both ops: out (N, H, F) through the epilogue and lse (N, H), the rows' scores
// from `scores`; with kPositive (GatScores only) also pos_out (N, H, F) and pos_weight (N, H), the
// sums over the edges whose LeakyReLU argument is positive. The values are read from source_rows (Ns,
// kPackedRow) when given (GatScores' el then points into them too), else from node_value. S is the
// dtype of the rows (node_value, out, pos_out); lse, pos_weight and the partials are Compute<S>.
// out_low (bf16 only, OutputLow): out's rounding error, or null.
template <class S, bool kPositive, class Scores>
void aggregate_forward(const Graph& graph, const Scores& scores, const Tensor& node_value,
                       const DropoutKey& attn_dropout, Tensor& out, Tensor& lse, Tensor* pos_out = nullptr,
                       Tensor* pos_weight = nullptr, const OutputEpilogue<Compute<S>>& epilogue = {},
                       const Tensor* source_rows = nullptr, Tensor* out_low = nullptr) {
  using T = Compute<S>;
  const long long N = graph.num_dst_nodes();
  const int H = static_cast<int>(lse.size(1)), F = static_cast<int>(node_value.size(2));
  if (N == 0 || H == 0) return;
  const int32_t* row_ptr = graph.row_ptr().data<int32_t>();  // (N+1,)
  const int32_t* src = graph.edge_src().data<int32_t>();     // (E,)
  T* l = lse.data<T>();                                      // (N, H)
  if (F == 0) {  // nothing to aggregate: lse alone (and pos_weight zero, as the contract says)
    row_softmax_kernel<S><<<warps::warp_blocks(N * H), kThreads, 0, cuda::stream()>>>(row_ptr, src, scores,
                                                                                      nullptr, l, N * H, H);
    CUDA_CHECK_LAUNCH("row_softmax_kernel");
    if constexpr (kPositive) pos_weight->zero_();
    return;
  }
  const T scale = drop_scale<T>(attn_dropout);
  const S* V = source_rows ? source_rows->data<S>() : node_value.data<S>();  // (N, v_stride)
  const int v_stride = source_rows ? kPackedRow : H * F;
  S* o = out.data<S>();  // (N, H, F)
  PositiveParts<S> pos;
  if constexpr (kPositive) pos.out = pos_out->data<S>(), pos.weight = pos_weight->data<T>();
  const void* low = nullptr;
  if constexpr (kHasOutputLow<S>) {
    if (out_low) pos.out_low = out_low->data<S>();
    low = pos.out_low;
  }
  with_gather_vec<S>(N, H, F, {V, o, pos.out, low}, [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    const Tiling tiling(H * F, VEC);
    const int G = tiling.G;
    const Tensor& order = graph.row_order();  // the uncut rows, longest first
    const unsigned row_blocks = group_blocks(order.numel() * tiling.tiles, G);
    // The kernels of G lanes where group_compiled says so (not with GAT's edge term), else kG = 0.
    constexpr bool kGeneric = Scores::kGenericGroups;
    auto rows_alone = [&] {
      with_compiled_group<S, VEC, false, kGeneric>(G, [&](auto group) {
        aggregate_forward_kernel<S, VEC, decltype(group)::value, kPositive, Items::rows>
            <<<row_blocks, kThreads, 0, cuda::stream()>>>(row_ptr, order.data<int32_t>(), src, scores, V, o,
                                                          l, pos, order.numel(), H, F, v_stride, tiling.tiles,
                                                          G, attn_dropout, scale, epilogue);
        CUDA_CHECK_LAUNCH("aggregate_forward_kernel");
      });
    };
    // Long rows: their chunks' partial states, merged in chunk order.
    ForwardChunks<T> parts;
    Tensor part_m, part_z, part_acc, part_z_pos, part_acc_pos;
    auto partials = [&](int64_t chunks) {
      constexpr DType partial = dtype_of<T>::value;
      part_m = Tensor::empty({chunks, H}, partial, Device::cuda, "aggregate partial m");
      part_z = Tensor::empty({chunks, H}, partial, Device::cuda, "aggregate partial z");
      part_acc = Tensor::empty({chunks, H, F}, partial, Device::cuda, "aggregate partial acc");
      parts.part_m = part_m.data<T>(), parts.part_z = part_z.data<T>(), parts.part_acc = part_acc.data<T>();
      if constexpr (kPositive) {
        part_z_pos = Tensor::empty({chunks, H}, partial, Device::cuda, "aggregate partial z_pos");
        part_acc_pos = Tensor::empty({chunks, H, F}, partial, Device::cuda, "aggregate partial acc_pos");
        pos.part_z = part_z_pos.data<T>(), pos.part_acc = part_acc_pos.data<T>();
      }
    };
    auto launch_chunks = [&](auto items, unsigned blocks, GridSplit split) {
      with_compiled_group<S, VEC, false, kGeneric>(G, [&](auto group) {
        aggregate_forward_kernel<S, VEC, decltype(group)::value, kPositive, decltype(items)::value>
            <<<blocks, kThreads, 0, cuda::stream()>>>(row_ptr, order.data<int32_t>(), src, scores, V, o, l,
                                                      pos, order.numel(), H, F, v_stride, tiling.tiles, G,
                                                      attn_dropout, scale, epilogue, parts, split);
        CUDA_CHECK_LAUNCH("aggregate_forward_kernel");
      });
    };
    if (!launch_rows_and_chunks(graph, false, G, row_blocks, tiling.tiles, parts, rows_alone, partials,
                                launch_chunks))
      return;
    aggregate_merge_kernel<S, VEC><<<group_blocks(N * tiling.tiles, G), kThreads, 0, cuda::stream()>>>(
        parts.rows.ptr, parts.part_m, parts.part_z, parts.part_acc, o, l, N, H, F, tiling.tiles, G, pos,
        epilogue);
    CUDA_CHECK_LAUNCH("aggregate_merge_kernel");
  });
}

// BackwardArgs of a graph and its tensors (tiles still to set).
template <class S>
BackwardArgs<S> backward_args(const Graph& graph, const Tensor& node_value, const Tensor& grad_out,
                              Tensor* grad_value, int H, const DropoutKey& attn_dropout) {
  BackwardArgs<S> a{};
  a.t_row_ptr = graph.t_row_ptr().data<int32_t>();
  a.t_dst = graph.t_edge_dst().data<int32_t>();
  a.t_edge_id = graph.t_edge_id().data<int32_t>();
  a.V = node_value.data<S>();
  a.grad_out = grad_out.data<S>();
  a.grad_stride = H * static_cast<int>(node_value.size(2));
  a.dV = grad_value ? grad_value->data<S>() : nullptr;
  a.N = graph.num_src_nodes(), a.E = graph.num_edges(), a.H = H, a.F = static_cast<int>(node_value.size(2));
  a.key = attn_dropout;
  a.scale = drop_scale<Compute<S>>(attn_dropout);
  return a;
}

// The walk over the transposed graph with a.G lanes per (source, head, tile), by the kernels of
// G lanes (or the generic ones, G = 0: with_compiled_group): short rows in one kernel, the chunks of
// long ones in a second and their dV (and sums) merged in chunk order.
template <class S, int VEC, int G, class Grad>
void walk_transposed(const Graph& graph, const BackwardArgs<S>& a, Grad grad) {
  using T = Compute<S>;
  const Tensor& order = graph.t_row_order();  // the uncut sources, longest first
  const unsigned source_blocks = group_blocks(order.numel() * a.H * a.tiles, a.G);
  auto sources_alone = [&] {
    attention_grad_kernel<S, VEC, G, Items::rows>
        <<<source_blocks, kThreads, 0, cuda::stream()>>>(a, grad, order.data<int32_t>(), order.numel());
    CUDA_CHECK_LAUNCH("attention_grad_kernel");
  };
  // Sources of more than a chunk of out-edges: chunk by chunk, the partials summed in chunk order.
  BackwardChunks<T> parts;
  Tensor part_acc, part_sum;
  auto partials = [&](int64_t chunks) {
    if (a.dV) {
      part_acc = Tensor::empty({chunks, int64_t{a.H}, int64_t{a.F}}, dtype_of<T>::value, Device::cuda,
                               "value grad partial acc");
      parts.part_acc = part_acc.data<T>();
    }
    if (grad.sum) {
      part_sum = Tensor::empty({chunks, int64_t{a.H}}, dtype_of<T>::value, Device::cuda, "edge sum partials");
      grad.part_sum = part_sum.data<T>();
    }
  };
  auto launch_chunks = [&](auto items, unsigned blocks, GridSplit split) {
    attention_grad_kernel<S, VEC, G, decltype(items)::value><<<blocks, kThreads, 0, cuda::stream()>>>(
        a, grad, order.data<int32_t>(), order.numel(), parts, split);
    CUDA_CHECK_LAUNCH("attention_grad_kernel");
  };
  if (!launch_rows_and_chunks(graph, true, a.G, source_blocks, int64_t{a.H} * a.tiles, parts, sources_alone,
                              partials, launch_chunks))
    return;
  if (!a.dV && !grad.sum) return;
  const Tiling row_tiling(a.H * a.F, VEC);
  value_grad_merge_kernel<S, VEC>
      <<<group_blocks(parts.rows.chunks * row_tiling.tiles, row_tiling.G), kThreads, 0, cuda::stream()>>>(
          parts.rows, parts.part_acc, a.dV, grad.part_sum, grad.sum, a.H, a.F, row_tiling.tiles,
          row_tiling.G);
  CUDA_CHECK_LAUNCH("value_grad_merge_kernel");
}

// Calls f(std::bool_constant<on>{}): a kernel's variant chosen once on the host, not per edge.
template <class Fn>
void with_flag(bool on, Fn&& f) {
  if (on)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// The GAT kernels with or without the edge term.
template <class Fn>
void with_edge_term(const Tensor& edge_term, Fn&& f) {
  with_flag(edge_term.defined(), f);
}

// GAT's fused forward for one dtype, with or without the edge term (args.edge_term defined:
// gat_attention_aggregate_forward dispatches on both).
template <class S, bool kTerm>
void gat_forward(const GatAttentionForwardArgs& args) {
  using T = Compute<S>;
  const Tensor &el = args.el, &er = args.er, &edge_term = args.edge_term, &node_value = args.node_value;
  Tensor &out = *args.out, &lse = *args.lse;
  Tensor *pos_out = args.pos_out, *pos_weight = args.pos_weight;
  const Tensor* out_bias = args.out_bias.defined() ? &args.out_bias : nullptr;
  const Tensor* source_rows = args.source_rows.defined() ? &args.source_rows : nullptr;
  const OutputActivation& activation = args.activation;
  const int H = static_cast<int>(el.size(1));
  OutputEpilogue<T> epilogue;
  epilogue.bias = out_bias ? out_bias->data<T>() : nullptr;
  epilogue.elu = activation.elu;
  epilogue.activation = {static_cast<T>(activation.alpha), static_cast<T>(activation.keep_scale())};
  epilogue.key = activation.dropout;
  // el[j] follows the values in a packed source row, in T (f32 after bf16 values: the row's
  // H F values are a whole number of T, packs_source_row), a row being kPackedRow S long.
  const T* el_rows = source_rows ? reinterpret_cast<const T*>(source_rows->data<S>() + H * node_value.size(2))
                                 : el.data<T>();
  const GatScores<S, kTerm> scores{el_rows,
                                   er.data<T>(),
                                   kTerm ? edge_term.data<S>() : nullptr,
                                   H,
                                   static_cast<T>(args.negative_slope),
                                   source_rows ? static_cast<int>(kPackedRow * sizeof(S) / sizeof(T)) : H};
  with_flag(pos_out != nullptr, [&](auto positive) {
    aggregate_forward<S, decltype(positive)::value>(*args.graph, scores, node_value, args.attn_dropout, out,
                                                    lse, pos_out, pos_weight, epilogue, source_rows,
                                                    args.out_low);
  });
}

// d er per (node, head) from the forward's positive sums, in the kernel that computes D; then one
// walk over the transposed graph gives dV, d el and, when asked, g per edge (= d edge_term,
// written straight into grad_edge_term). A head wider than one group of lanes (F > 32 vectors)
// takes the unfused path: the scores and d scores (E, H) exist for the length of this backward.
// Returns whether d bias was taken from the row pass (the entry point writes *args.bias_taken).
// For bf16 the wide heads' unfused path is an error (gat_edge_scores' CUDA kernels take f32 and
// f64).
template <class S>
bool gat_backward(const GatAttentionBackwardArgs& args) {
  using T = Compute<S>;
  const Graph& graph = *args.graph;
  const Tensor &el = args.el, &er = args.er, &edge_term = args.edge_term, &node_value = args.node_value;
  const double negative_slope = args.negative_slope;
  const DropoutKey& attn_dropout = args.attn_dropout;
  const Tensor &out = args.out, &out_bias = args.out_bias, &lse = args.lse, &pos_out = args.pos_out,
               &pos_weight = args.pos_weight, &grad_out = args.grad_out;
  Tensor *grad_el = args.grad_el, *grad_er = args.grad_er, *grad_edge_term = args.grad_edge_term,
         *grad_value = args.grad_value, *grad_pre = args.grad_pre, *grad_bias = args.grad_bias,
         *bias_partials = args.bias_partials;
  const OutputActivation& activation = args.activation;
  const long long N = graph.num_dst_nodes(), E = graph.num_edges();
  bool bias_written = false;
  const int H = static_cast<int>(el.size(1)), F = static_cast<int>(node_value.size(2));
  BackwardArgs<S> a =
      backward_args<S>(graph, node_value, activation.elu ? *grad_pre : grad_out, grad_value, H, attn_dropout);
  with_gather_vec<S>(
      graph.num_src_nodes(), H, F, {a.V, a.grad_out, a.dV, grad_out.data<S>(), out.data<S>()}, [&](auto vec) {
        constexpr int VEC = decltype(vec)::value;
        const Tiling tiling(F, VEC);  // of one head
        if (tiling.tiles > 1) {
          GAT_CHECK((std::is_same_v<S, T>), "gat_attention_aggregate backward: bf16 heads of ", F,
                    " features (more than ", kWarp * VEC, ") are not supported on CUDA");
          if (activation.elu)  // the activation's backward on its own, then the unfused path
            elu_dropout_backward(out, grad_out, activation.alpha, activation.dropout, activation.keep_scale(),
                                 KeepMask(), *grad_pre);
          const Tensor& grad_in = activation.elu ? *grad_pre : grad_out;
          Tensor scores = Tensor::empty({E, H}, el.dtype(), Device::cuda, "gat scores (backward)");
          gat_edge_scores_forward(graph, el, er, edge_term, negative_slope, scores);
          Tensor ds;
          if (grad_el || grad_er || grad_edge_term)
            ds = Tensor::empty({E, H}, el.dtype(), Device::cuda, "d gat scores");
          CsrSoftmaxAggregateBackwardArgs unfused;
          unfused.graph = &graph;
          unfused.edge_scores = scores;
          unfused.node_value = node_value;
          unfused.attn_dropout = attn_dropout;
          unfused.lse = lse;
          unfused.grad_out = grad_in;
          unfused.grad_scores = ds.defined() ? &ds : nullptr;
          unfused.grad_value = grad_value;
          csr_softmax_aggregate_backward(unfused);
          if (ds.defined())
            gat_edge_scores_backward(graph, el, er, edge_term, negative_slope, ds, grad_el, grad_er,
                                     grad_edge_term);
          return;
        }
        a.tiles = 1;
        RowDer<S> der{};
        if (grad_er) {  // from the forward's positive sums, which it must have been asked for
          const char* op = "gat_attention_aggregate backward (d er on CUDA)";
          check_shape(op, "pos_out", pos_out, out.shape());
          check_same(op, "pos_out", pos_out, "out", out);
          check_shape(op, "pos_weight", pos_weight, lse.shape());
          check_same(op, "pos_weight", pos_weight, "lse", lse);
          der = {pos_out.data<S>(), pos_weight.data<T>(), grad_er->data<T>(),
                 static_cast<T>(1.0 - negative_slope)};
        }
        // er, lse and D of each destination packed in one row of 4H values (RowPack): the walk
        // reads them with one access an edge instead of three (at 100M edges, 8 heads: 58.3 ->
        // 56.9 ms a step; random 32-byte reads cost the DRAM an access each, bench/gather_ceiling.cu).
        // A short gradient row (H F + 3 H <= 16 values: the output layer) goes into the packed row
        // too, whose 64 bytes the walk then reads with one access an edge instead of two. The rows
        // are Compute<S>: a bf16 gradient stays in its own rows (a bf16 walk reads it there).
        const int lead = std::is_same_v<S, T> && H * F + 3 * H <= kPackedRow ? H * F : 0;
        const int stride = lead ? kPackedRow : 4 * H;
        Tensor rows = Tensor::empty({N, int64_t{stride}}, dtype_of<T>::value, Device::cuda, "gat row terms");
        T* const packed = rows.data<T>();
        const long long NH = N * H;
        RowActivation<S> act;
        if (activation.elu) {
          const double keep_scale = activation.keep_scale();
          act = {grad_pre->data<S>(),
                 {static_cast<T>(keep_scale), static_cast<T>(activation.alpha * keep_scale)},
                 activation.dropout,
                 static_cast<T>(1.0 / keep_scale),
                 static_cast<T>(1.0 / activation.alpha)};
        }
        bias_written = grad_bias && bias_in_rows(H, F);
        Tensor partials;  // of d bias
        RowPack<S> pack;
        pack.er = er.data<T>(), pack.lse = lse.data<T>(), pack.rows = packed, pack.stride = stride,
        pack.lead = lead;
        if constexpr (kHasOutputLow<S>)
          if (args.out_low.defined()) pack.out_low = args.out_low.data<S>();
        head_rows_dot<S>(grad_out.data<S>(), out.data<S>(), nullptr, NH, F, der,
                         out_bias.defined() ? out_bias.data<T>() : nullptr, H, pack, act,
                         bias_written ? &partials : nullptr);
        if (bias_written && bias_partials)
          *bias_partials = partials;
        else if (bias_written)
          bias_from_partials({partials, grad_bias});
        if constexpr (std::is_same_v<S, T>)
          if (lead) a.grad_out = packed, a.grad_stride = stride;
        if (!grad_el && !grad_edge_term && !grad_value) return;
        with_edge_term(edge_term, [&](auto term) {
          const T *const er_rows = packed + lead, *const lse_rows = er_rows + H,
                         *const D_rows = er_rows + 2 * H;
          const GatGrad<S, decltype(term)::value> grad{el.data<T>(),
                                                       er_rows,
                                                       edge_term.defined() ? edge_term.data<S>() : nullptr,
                                                       lse_rows,
                                                       D_rows,
                                                       stride,
                                                       grad_edge_term ? grad_edge_term->data<S>() : nullptr,
                                                       static_cast<T>(negative_slope),
                                                       grad_el ? grad_el->data<T>() : nullptr,
                                                       nullptr};
          a.G = tiling.G;
          with_compiled_group<S, VEC, true, decltype(term)::value>(
              tiling.G, [&](auto group) { walk_transposed<S, VEC, decltype(group)::value>(graph, a, grad); });
        });
      });
  return bias_written;
}

// csr_softmax_aggregate's forward for one dtype of edge scores and values (the entry point,
// csr_softmax_aggregate.cu, dispatches on it).
template <class S>
void stored_forward(const CsrSoftmaxAggregateForwardArgs& args) {
  const StoredScores<S> scores{args.edge_scores.data<S>(), static_cast<int>(args.edge_scores.size(1))};
  aggregate_forward<S, false>(*args.graph, scores, args.node_value, args.attn_dropout, *args.out, *args.lse);
}

// csr_softmax_aggregate's backward for one dtype of edge scores and values.
template <class S>
void stored_backward(const CsrSoftmaxAggregateBackwardArgs& args) {
  using T = Compute<S>;
  const Graph& graph = *args.graph;
  const Tensor &edge_scores = args.edge_scores, &node_value = args.node_value, &lse = args.lse,
               &grad_out = args.grad_out;
  Tensor *grad_scores = args.grad_scores, *grad_value = args.grad_value;
  const long long N = graph.num_dst_nodes(), E = graph.num_edges();
  const int H = static_cast<int>(edge_scores.size(1)), F = static_cast<int>(node_value.size(2));
  const bool need_scores = grad_scores && E * H > 0,
             need_value = grad_value && graph.num_src_nodes() * H * F > 0;
  if (F == 0) {  // no features: the scores do not matter
    if (need_scores) grad_scores->zero_();
    return;
  }
  if (!need_scores && !need_value) return;
  BackwardArgs<S> a =
      backward_args<S>(graph, node_value, grad_out, need_value ? grad_value : nullptr, H, args.attn_dropout);
  S* ds = need_scores ? grad_scores->data<S>() : nullptr;  // (E, H)
  with_gather_vec<S>(graph.num_src_nodes(), H, F, {a.V, a.grad_out, a.dV}, [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    const Tiling tiling(F, VEC);  // of one head
    a.tiles = tiling.tiles;
    // da parts: straight into ds when a head is one tile and ds is of the compute type, else
    // one (E, H) slice per tile (bf16 ds: da in f32 until ds is rounded once).
    constexpr bool kDaInDs = std::is_same_v<S, T>;
    Tensor da_parts;
    if (need_scores && (tiling.tiles > 1 || !kDaInDs))
      da_parts = Tensor::empty({tiling.tiles, E, H}, dtype_of<T>::value, Device::cuda, "d attention parts");
    T* da = nullptr;
    if (da_parts.defined())
      da = da_parts.data<T>();
    else if constexpr (kDaInDs)
      da = ds;
    a.G = tiling.G;
    with_compiled_group<S, VEC, true, false>(tiling.G, [&](auto group) {
      walk_transposed<S, VEC, decltype(group)::value>(graph, a,
                                                      ScoreGrad<S>{edge_scores.data<S>(), lse.data<T>(), da});
    });
    if (!need_scores) return;
    row_softmax_grad_kernel<S>
        <<<warps::warp_blocks(N * warps::HeadLanes(H).blocks), kThreads, 0, cuda::stream()>>>(
            graph.row_ptr().data<int32_t>(), edge_scores.data<S>(), lse.data<T>(), da, ds, N, E, H,
            tiling.tiles);
    CUDA_CHECK_LAUNCH("row_softmax_grad_kernel");
  });
}

// Compiled in the files named above, not where this header is included.
extern template void stored_forward<float>(const CsrSoftmaxAggregateForwardArgs&);
extern template void stored_forward<double>(const CsrSoftmaxAggregateForwardArgs&);
extern template void stored_forward<bf16>(const CsrSoftmaxAggregateForwardArgs&);
extern template void stored_backward<float>(const CsrSoftmaxAggregateBackwardArgs&);
extern template void stored_backward<double>(const CsrSoftmaxAggregateBackwardArgs&);
extern template void stored_backward<bf16>(const CsrSoftmaxAggregateBackwardArgs&);
extern template void gat_forward<float, false>(const GatAttentionForwardArgs&);
extern template void gat_forward<float, true>(const GatAttentionForwardArgs&);
extern template void gat_forward<double, false>(const GatAttentionForwardArgs&);
extern template void gat_forward<double, true>(const GatAttentionForwardArgs&);
extern template void gat_forward<bf16, false>(const GatAttentionForwardArgs&);
extern template void gat_forward<bf16, true>(const GatAttentionForwardArgs&);
extern template bool gat_backward<float>(const GatAttentionBackwardArgs&);
extern template bool gat_backward<double>(const GatAttentionBackwardArgs&);
extern template bool gat_backward<bf16>(const GatAttentionBackwardArgs&);

}  // namespace gat::ops::cuda_impl::csr_aggregate
