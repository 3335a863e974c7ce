// CUDA kernels of gatv2_attention_aggregate. The schedule (a group of lanes per (row, block of
// heads) with the online softmax, the score's sum over a head's lanes, chunks of long rows, the
// saved scores and signs, the backward's walk over the transposed graph and its pass over the
// rows) is described in docs/kernels.md. No float atomics: every sum has a fixed order, so results
// are bitwise reproducible.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/detail/attention_kernels.cuh"
#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"
#include "gat/framework/ops/detail/graph_kernels.cuh"
#include "gat/framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

using namespace attention;

// Edges (forward) and transposed entries (the backward's walk) whose loads are issued together,
// as GAT's kernels do (kUnroll, kUnrollBackward, kUnrollOf in csr_softmax_aggregate_kernels.cuh):
// half as many for a lane of 8 values, which keeps as many bytes in flight.
constexpr int kBatch = 4;
template <int VEC>
constexpr int kBatchOf = VEC > 4 ? kBatch / 2 : kBatch;

// The op's inputs as the kernels read them.
template <class T>
struct Gatv2Args {
  const T* __restrict__ xl;   // (Ns, H, F)
  const T* __restrict__ xr;   // (Nd, H, F)
  const T* __restrict__ att;  // (H, F)
  const T* __restrict__ et;   // (E, H, F) or null
  int H, F;
  int P;      // sign bits per head: gatv2_sign_head_bits(F)
  int words;  // sign words per edge: gatv2_sign_words(H, F)
  T slope;    // negative_slope
  DropoutKey key;
  T scale;  // 1 / (1 - p)
};

// The work of one launch over a CSR (by destination, or the transpose's rows by source): its
// uncut rows in the graph's row order (Graph::row_order, longest first), all its rows in index
// order, or, when chunk_ptr is set, the chunks of the longer rows.
struct Segments {
  const int32_t* row_ptr;    // (N+1,)
  const int32_t* order;      // (count,) the rows, or null: segment n is row n (rows only)
  const int32_t* chunk_ptr;  // (N+1,) or null: one segment per row
  const int32_t* chunk_row;  // (count,): each chunk's row (with chunk_ptr)
  long long count;           // segments: rows or chunks
  int chunk;                 // entries per chunk
  // Segment n's row and entry range.
  __device__ __forceinline__ void get(long long n, long long& row, long long& begin, long long& end) const {
    if (chunk_ptr) {
      const ChunkRange r = find_chunk(row_ptr, chunk_ptr, chunk_row, n, chunk);
      row = r.row, begin = r.begin, end = r.end;
      return;
    }
    row = order ? order[n] : n, begin = row_ptr[row], end = row_ptr[row + 1];
  }
};

// A group of G lanes (a power of two, at most a warp) takes one work item: a segment and a block
// of G / LH heads. LH lanes (a power of two) hold one head, VEC features each: this lane has
// features [c, c + VEC) of its head, or none when c >= F; such lanes still join the head's sums.
// G is a launch argument, LH a template one (the sums' butterflies are unrolled), except for f64
// (LH = 0: the lanes of a head, lh, worked out from F and VEC as HeadLayout does, and the same
// butterflies looped: one kernel of each for every F, in the dtype of the gradient checks,
// where speed does not matter). The items' grid
// stride is a multiple of head_blocks, so a group keeps one block of heads over all its items
// (the groups past the largest multiple take none): its sums over them (d att's) stay in its
// registers, and its row of an (R, H, F) tensor of group sums is group / head_blocks, with
// R = partial_rows(the launch's blocks).
template <int LH>
struct HeadGroupLane {
  long long first_item;  // this group's first item (its index in the grid)
  long long stride;      // items per grid-stride round: groups that take items
  int G, head_blocks;
  int lh;     // lanes a head: LH, or (LH = 0) the power of two covering F / VEC, at most a warp
  int heads;  // heads a group: G / lh (group_heads())
  int head;   // the lane's head within the item's block of heads
  int c;      // the lane's first feature within its head
  __device__ HeadGroupLane(int G, int VEC, int head_blocks, int F) : G(G), head_blocks(head_blocks) {
    lh = LH;
    if constexpr (LH == 0) {
      const int lanes = max((F + VEC - 1) / VEC, 1);
      for (lh = 1; lh < lanes && lh < kWarp;) lh *= 2;
    }
    const int lane = threadIdx.x % kWarp, groups = kWarp / G;
    first_item = warps::warp_id() * groups + lane / G;
    stride = warps::warp_count() * groups / head_blocks * head_blocks;
    heads = G / lh;
    head = (lane % G) / lh;
    c = (lane % lh) * VEC;
  }
  // G / lh: a shift of G at a template LH (what the kernels measured computed, each time: kept
  // in a register, it cost the f32 pass over the rows spills), else the member.
  __device__ __forceinline__ int group_heads() const { return LH > 0 ? G / LH : heads; }
  // This lane's place in the (R, H, F) group sums, or -1 (a lane without features, a group
  // without items).
  __device__ long long sum_at(int H, int F) const {
    if (first_item >= stride) return -1;
    const int h = static_cast<int>(first_item % head_blocks) * group_heads() + head;
    if (h >= H || c >= F) return -1;
    return (first_item / head_blocks * H + h) * static_cast<long long>(F) + c;
  }
};
// Rows of group sums that a launch of `blocks` blocks writes: one per head_blocks groups.
inline long long partial_rows(unsigned blocks, int G, int head_blocks) {
  return static_cast<long long>(blocks) * (kThreads / G) / head_blocks;
}

// A work item as one lane sees it: segment n (row `row`'s entries [begin, end), or chunk n's of
// a long row), the lane's head, lane_offset = head F + c (the lane's first feature within a node's
// H F), whether the lane has features (c < F) and whether it is the head's first lane (c = 0).
// A lane of the last block past the H heads (not `exists`) takes head H - 1 without features and
// not first: it follows its group (whose lanes draw the dropout decisions together) and writes
// nothing.
struct LaneItem {
  long long n, row, begin, end, lane_offset, HF;
  long long sums;             // where the segment's sums go: its row, or a chunk's own index
  int head;                   // the lane's head (of the H)
  int c;                      // the lane's first feature within its head
  int first_head, last_head;  // the heads of the lane's group
  bool exists, has, first;
  // The lane's features of node `node` of an (nodes, H, F) tensor (zeros for a lane without).
  template <class T, int VEC>
  __device__ __forceinline__ Vec<T, VEC> lane_vec(const T* base, long long node) const {
    return has ? load_vec<T, VEC>(base + node * HF + lane_offset) : Vec<T, VEC>{};
  }
  // Its place in an (nodes, H, F) tensor and in an (nodes, H) one.
  __device__ __forceinline__ long long at(long long node) const { return node * HF + lane_offset; }
  __device__ __forceinline__ long long head_at(long long node, int H) const { return node * H + head; }
};

// f(item) for each of this lane's group's work items (segment, block of G / LH heads) in
// grid-stride order where the segment is this launch's. A group's lanes skip or run an item
// together (a head's sums need all its lanes, the dropout draws all the group's).
template <int LH, class Fn>
__device__ __forceinline__ void for_each_item(const HeadGroupLane<LH>& g, const Segments& seg, int H, int F,
                                              Fn&& f) {
  const int head_blocks = g.head_blocks;
  if (g.first_item >= g.stride) return;
  for (long long item = g.first_item; item < seg.count * head_blocks; item += g.stride) {
    LaneItem it;
    it.n = item / head_blocks;
    it.first_head = static_cast<int>(item - it.n * head_blocks) * g.group_heads();
    it.last_head = min(H, it.first_head + g.group_heads()) - 1;
    it.head = it.first_head + g.head;
    seg.get(it.n, it.row, it.begin, it.end);
    it.sums = seg.chunk_ptr ? it.n : it.row;
    const bool exists = it.head < H;
    if (!exists) it.head = H - 1;
    it.c = g.c;
    it.lane_offset = static_cast<long long>(it.head) * F + g.c;
    it.HF = static_cast<long long>(H) * F;
    it.exists = exists, it.has = exists && g.c < F, it.first = exists && g.c == 0;
    f(it);
  }
}

template <class T>
__device__ __forceinline__ T leaky(T x, T slope) {
  return x > T(0) ? x : slope * x;
}

// The lane's share of one edge: x = xl[j] + xr[i] (+ et[e]) on its features (zeros on a lane
// without features, whose vectors are zero) and its part of the score, sum att LeakyReLU(x).
template <class T, int VEC>
__device__ __forceinline__ T score_part(const Vec<T, VEC>& l, const Vec<T, VEC>& r,
                                        const T* et_lane,  // the lane's et[e,h,c..], or null
                                        const Vec<T, VEC>& at, T slope, T (&x)[VEC]) {
  Vec<T, VEC> q{};
  if (et_lane) q = load_vec<T, VEC>(et_lane);
  T p = 0;
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    x[k] = l.v[k] + r.v[k];
    if (et_lane) x[k] += q.v[k];
    p += at.v[k] * leaky(x[k], slope);
  }
  return p;
}

// The sum over the lh lanes of a head (HeadGroupLane): warps::group_sum<LH>, or with LH = 0 the
// same butterfly, looped over a runtime lh.
template <int LH, class T>
__device__ __forceinline__ T head_sum(T v, int lh) {
  if constexpr (LH > 0) {
    return warps::group_sum<LH>(v);
  } else {
    const unsigned lanes = lh == kWarp ? 0xffffffffu : (1u << lh) - 1;
    const unsigned mask = lanes << ((threadIdx.x % kWarp) & ~(lh - 1));
    for (int offset = lh / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset);
    return v;
  }
}

// The score s[e,h] of the lane's head for edge e: its lanes' parts summed by a fixed butterfly
// (every lane gets the same bits); x as score_part.
template <class T, int VEC, int LH>
__device__ __forceinline__ T head_score(const Gatv2Args<T>& a, const Vec<T, VEC>& l, const Vec<T, VEC>& r,
                                        const Vec<T, VEC>& at, const LaneItem& it, int lh, long long e,
                                        T (&x)[VEC]) {
  return head_sum<LH>(score_part(l, r, it.has && a.et ? a.et + it.at(e) : nullptr, at, a.slope, x), lh);
}

// The mask of the W aligned lanes (W a power of two, at most a warp) that hold this lane.
__device__ __forceinline__ unsigned aligned_lanes(int W) {
  const unsigned lanes = W == kWarp ? 0xffffffffu : (1u << W) - 1;
  return lanes << ((threadIdx.x % kWarp) & ~(W - 1));
}

// The signs of x (the header's layout): head h's bits start at bit h P of its edge's words, with
// P = LH VEC, the power of two covering F. So a lane's VEC bits are at q = head P + c, the lanes
// of a group hold consecutive bits, and a group that shares its row with others (it then has 32
// lanes) starts on a word: the W = min(32 / VEC, G) aligned lanes that hold q / 32 hold all of it.
constexpr int kSignBits = 32;
__device__ __forceinline__ int sign_bit(const LaneItem& it, int P) { return it.head * P + it.c; }

// The word of this lane's signs, at bit q = sign_bit: its VEC bits OR-ed over the W lanes that
// share the word (all must call it). A lane without features has x = 0 and adds no bit.
template <class T, int VEC>
__device__ __forceinline__ unsigned sign_word(const T (&x)[VEC], int q, int G) {
  unsigned bits = 0;
#pragma unroll
  for (int k = 0; k < VEC; ++k) bits |= (x[k] > T(0) ? 1u : 0u) << k;
  bits <<= q % kSignBits;
  const int W = min(kSignBits / VEC, G);
  const unsigned mask = aligned_lanes(W);
  for (int offset = W / 2; offset > 0; offset /= 2) bits |= __shfl_xor_sync(mask, bits, offset);
  return bits;
}

// This lane's VEC signs of edge e as bits 0 .. VEC - 1 (for a lane with features).
__device__ __forceinline__ unsigned lane_signs(const int32_t* __restrict__ signs, long long e, int words,
                                               int q) {
  return static_cast<unsigned>(signs[e * words + q / kSignBits]) >> (q % kSignBits);
}

// Where the forward saves each edge's score s (E, H) and signs (E, words); null: not saved.
template <class T>
struct SavedEdges {
  T* __restrict__ scores;       // (E, H) or null
  int32_t* __restrict__ signs;  // (E, words), with scores
};

// Saves edge e's score s and the signs of x for the lane's head (all the group's lanes call it;
// the lane that holds a word's first bit writes it).
template <class T, int VEC>
__device__ __forceinline__ void save_edge(const SavedEdges<T>& saved, const Gatv2Args<T>& a,
                                          const LaneItem& it, int G, long long e, T s, const T (&x)[VEC]) {
  const int q = sign_bit(it, a.P);
  const unsigned word = sign_word<T, VEC>(x, q, G);
  if (it.first) saved.scores[it.head_at(e, a.H)] = s;
  if (it.exists && q % kSignBits == 0) saved.signs[e * a.words + q / kSignBits] = static_cast<int32_t>(word);
}

template <class T, int VEC>
__device__ __forceinline__ T dot_part(const Vec<T, VEC>& a, const Vec<T, VEC>& b) {
  T p = 0;
#pragma unroll
  for (int k = 0; k < VEC; ++k) p += a.v[k] * b.v[k];
  return p;
}

// Forward: one group per (segment, block of heads) runs the online softmax over the segment's
// edges, the score of each reduced over the head's lanes. Row segments write out and lse; chunk
// segments their partial (m, z, acc), merged by aggregate_merge_kernel. Both save each edge's
// score and signs when `saved` has them.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_forward_kernel(Gatv2Args<T> a, Segments seg,
                         const int32_t* __restrict__ src,  // (E,)
                         int G, int head_blocks, SavedEdges<T> saved,
                         T* __restrict__ out,       // (Nd, H, F)   (row segments)
                         T* __restrict__ lse,       // (Nd, H)      (row segments)
                         T* __restrict__ part_m,    // (W, H)       (chunk segments)
                         T* __restrict__ part_z,    // (W, H)       (chunk segments)
                         T* __restrict__ part_acc)  // (W, H, F)    (chunk segments)
{
  SegmentKeep keep(a.key, G);
  const HeadGroupLane<LH> g(G, VEC, head_blocks, a.F);
  for_each_item(g, seg, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    OnlineState<T, VEC> st;
    // Edges [e, e + U) of the window: their sources' rows loaded together, then added in order.
    auto edges = [&](const ConsecutiveEdges& window, long long e, auto count) {
      constexpr int U = decltype(count)::value;
      int32_t j[U];
      Vec<T, VEC> l[U];
#pragma unroll
      for (int u = 0; u < U; ++u) j[u] = src[e + u];
#pragma unroll
      for (int u = 0; u < U; ++u) l[u] = it.lane_vec<T, VEC>(a.xl, j[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        T x[VEC];
        const T s = head_score<T, VEC, LH>(a, l[u], r, at, it, g.lh, e + u, x);
        if (saved.scores) save_edge<T, VEC>(saved, a, it, G, e + u, s, x);
        st.add(s, window.factor(keep, e + u, it.head, a.scale), l[u]);
      }
    };
    for (long long window_begin = it.begin; window_begin < it.end;) {
      const ConsecutiveEdges window(keep, window_begin, it.end, a.H, it.first_head, it.last_head);
      long long e = window.begin;
      for (; e + kBatchOf<VEC> <= window.end; e += kBatchOf<VEC>) edges(window, e, Int<kBatchOf<VEC>>{});
      for (; e < window.end; ++e) edges(window, e, Int<1>{});
      window_begin = window.end;
    }
    if (seg.chunk_ptr) {
      if (it.has) store_vec<T, VEC>(part_acc + it.at(it.sums), to_vec(st.acc));
      if (it.first) part_m[it.head_at(it.sums, a.H)] = st.m, part_z[it.head_at(it.sums, a.H)] = st.z;
    } else if (it.has) {
      write_row<T, VEC>(out, lse, it.row, a.H, a.F, it.head, static_cast<int>(it.lane_offset), st.m, st.z,
                        st.acc);
    }
  });
}

// The tensors of the backward besides the inputs.
template <class T>
struct GradArgs {
  const T* __restrict__ lse;          // (Nd, H)
  const T* __restrict__ D;            // (Nd, H): G[i,h,:].out[i,h,:]
  const T* __restrict__ grad_out;     // (Nd, H, F)
  T* scores_ds;                       // (E, H): the forward's s; the walk leaves ds in it
  const int32_t* __restrict__ signs;  // (E, words), the forward's
};

// Backward, the walk over the transposed graph: one group per (segment of a source's out-edges,
// block of heads), xl[j] in registers. Per entry (edge e, destination i) it gathers G[i] and
// reads s[e,h], the signs, lse[i,h] and D[i,h]; a = exp(s - lse), da = keep / (1 - p) G[i].xl[j]
// (a sum over the head's lanes), ds = a (da - D) and m = LeakyReLU'(x) from the sign. It sums
// a~ G[i] + ds att m (d xl) and ds m xl[j] (the sources' part of d att), and with write_ds
// overwrites s[e,h] with ds[e,h] for the pass over the rows. Row segments write d xl by source,
// chunk segments partials (W, H, F) summed by value_grad_merge_kernel; d att's part goes to the
// group's row of att_sums (HeadGroupLane). Any output may be null.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_source_grad_kernel(Gatv2Args<T> a, GradArgs<T> b, Segments seg,
                             const int32_t* __restrict__ t_dst,      // (E,)
                             const int32_t* __restrict__ t_edge_id,  // (E,)
                             int G, int head_blocks, bool write_ds,
                             T* __restrict__ dxl,       // (Ns, H, F) by row, (W, H, F) by chunk, or null
                             T* __restrict__ att_sums)  // (R, H, F) or null
{
  SegmentKeep keep(a.key, G);
  const HeadGroupLane<LH> g(G, VEC, head_blocks, a.F);
  T acc_att[VEC] = {};  // over all the group's items
  for_each_item(g, seg, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    const int q = sign_bit(it, a.P);
    // Lanes that read s[e,h] besides the one that overwrites it: the head's others, and those of
    // a block's heads past H (they take head H - 1).
    const bool shared_scores = g.lh > 1 || it.last_head - it.first_head + 1 < g.group_heads();
    T acc[VEC] = {};
    // Entries [k, k + U) of the window: their loads issued together, then added in order.
    auto entries = [&](const ScatteredEdges& window, long long k, auto count) {
      constexpr int U = decltype(count)::value;
      long long eh[U], ih[U];  // (edge, head) and (destination, head)
      int32_t e[U], i[U];      // edge and destination
      Vec<T, VEC> gi[U];
      T s[U], lse[U], D[U], dot[U];
      unsigned positive[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        e[u] = t_edge_id[k + u], i[u] = t_dst[k + u];
        eh[u] = it.head_at(e[u], a.H), ih[u] = it.head_at(i[u], a.H);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        gi[u] = it.lane_vec<T, VEC>(b.grad_out, i[u]);
        s[u] = b.scores_ds[eh[u]], lse[u] = b.lse[ih[u]], D[u] = b.D[ih[u]];
        positive[u] = it.has ? lane_signs(b.signs, e[u], a.words, q) : 0u;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) dot[u] = head_sum<LH>(dot_part(gi[u], l), g.lh);
      // Every lane has read s[e,h] before the head's first lane overwrites it.
      if (write_ds && shared_scores) __syncwarp(aligned_lanes(G));
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const T w = exp(s[u] - lse[u]);
        const T drop = window.factor(keep, k + u, e[u], it.head, a.scale);
        const T ds = w * (dot[u] * drop - D[u]);
        const T kept = w * drop;
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const T m = (positive[u] >> v) & 1u ? T(1) : a.slope;
          acc[v] += kept * gi[u].v[v] + ds * at.v[v] * m;
          acc_att[v] += ds * m * l.v[v];
        }
        if (write_ds && it.first) b.scores_ds[eh[u]] = ds;
      }
    };
    for (long long window_begin = it.begin; window_begin < it.end;) {
      const ScatteredEdges window(keep, t_edge_id, window_begin, it.end, a.H, it.first_head, it.last_head);
      long long k = window.begin;
      for (; k + kBatchOf<VEC> <= window.end; k += kBatchOf<VEC>) entries(window, k, Int<kBatchOf<VEC>>{});
      for (; k < window.end; ++k) entries(window, k, Int<1>{});
      window_begin = window.end;
    }
    if (it.has && dxl) store_vec<T, VEC>(dxl + it.at(it.sums), to_vec(acc));
  });
  const long long at_sum = g.sum_at(a.H, a.F);
  if (att_sums && at_sum >= 0) store_vec<T, VEC>(att_sums + at_sum, to_vec(acc_att));
}

// Backward, the pass over the rows: one group per (segment of a row, block of heads), xr[i] in
// registers. Per edge it reads ds[e,h] and the signs (the edge's, contiguous along the row) and
// et[e]: t = ds att m gives d edge_term[e] = t and d xr[i] = the sum of t; the rows' part of d att
// is the sum of ds m (xr[i] + et[e]). Row segments write d xr by row, chunk segments partials
// (W, H, F) summed by value_grad_merge_kernel; d att's part goes to the group's row of att_sums
// (HeadGroupLane). Any output may be null. Nothing is summed across lanes; but with LH at launch
// (LH = 0) ptxas spilled more in the f32 kernel of lanes of 4 (40 bytes of loads against 12), the
// pass of the 100M-edge graph's output layer, so only f64 takes LH = 0 here.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_row_grad_kernel(Gatv2Args<T> a, Segments seg,
                          const T* __restrict__ ds,           // (E, H)
                          const int32_t* __restrict__ signs,  // (E, words)
                          int G, int head_blocks,
                          T* __restrict__ dxr,       // (Nd, H, F) by row, (W, H, F) by chunk, or null
                          T* __restrict__ att_sums,  // (R, H, F) or null
                          T* __restrict__ det)       // (E, H, F) or null
{
  const HeadGroupLane<LH> g(G, VEC, head_blocks, a.F);
  T acc_att[VEC] = {};  // over all the group's items
  for_each_item(g, seg, a.H, a.F, [&](const LaneItem& it) {
    if (!it.has) return;
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    const int q = sign_bit(it, a.P);
    T acc_r[VEC] = {};
#pragma unroll 4
    for (long long e = it.begin; e < it.end; ++e) {
      const T d = ds[it.head_at(e, a.H)];
      const unsigned positive = lane_signs(signs, e, a.words, q);
      const Vec<T, VEC> x = a.et ? load_vec<T, VEC>(a.et + it.at(e)) : Vec<T, VEC>{};
      T t[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const T m = (positive >> k) & 1u ? T(1) : a.slope;
        // t is rounded on its own (mul_rn), so d xr sums the values written to d edge_term
        // whether or not those are asked for. With a plain product nvcc compiled two versions of
        // this loop: with det it rounded t and added it, without det it fused the product into
        // the sum (one rounding), and d xr alone had other bits than d xr beside d edge_term.
        t[k] = detail::mul_rn(d * at.v[k], m);
        acc_r[k] += t[k];
        acc_att[k] += d * m * (r.v[k] + x.v[k]);
      }
      if (det) store_vec<T, VEC>(det + it.at(e), to_vec(t));
    }
    if (dxr) store_vec<T, VEC>(dxr + it.at(it.sums), to_vec(acc_r));
  });
  const long long at_sum = g.sum_at(a.H, a.F);
  if (att_sums && at_sum >= 0) store_vec<T, VEC>(att_sums + at_sum, to_vec(acc_att));
}

// The scores alone: one group per (row, block of heads), the head's first lane writes s[e,h];
// with saved.signs also the signs, as the forward saves them. Launched with LH = 0 (the score's
// sums looped, the same bits): it serves gatv2_edge_scores and the backward of a forward that did
// not save its scores (PyTorch's operators), not the layers' training step.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads) gatv2_scores_kernel(Gatv2Args<T> a, Segments seg,
                                                                const int32_t* __restrict__ src,  // (E,)
                                                                int G, int head_blocks, SavedEdges<T> saved) {
  const HeadGroupLane<LH> g(G, VEC, head_blocks, a.F);
  for_each_item(g, seg, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    for (long long e = it.begin; e < it.end; ++e) {
      const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, src[e]);
      T x[VEC];
      const T s = head_score<T, VEC, LH>(a, l, r, at, it, g.lh, e, x);
      if (saved.signs)
        save_edge<T, VEC>(saved, a, it, G, e, s, x);
      else if (it.first)
        saved.scores[it.head_at(e, a.H)] = s;
    }
  });
}

// ---- host side -------------------------------------------------------------------------

// The lanes of a head and the heads of a group: LH = the power of two covering F / VEC vectors
// (a head must fit one warp), G = LH times the power of two covering H (at most a warp), and
// head_blocks = the blocks of G / LH heads per row.
struct HeadLayout {
  int LH, G, head_blocks;
  HeadLayout(const char* op, int H, int F, int vec) {
    const int lanes = (F + vec - 1) / vec;
    GAT_CHECK(lanes <= kWarp, op, " (CUDA): a head of F = ", F, " features needs ", lanes, " lanes of ", vec,
              " features; at most ", kWarp,
              " are supported (F <= 128 in f32 and F <= 64 in f64 when F is a multiple of 4 or 2, "
              "else F <= 32)");
    LH = pow2_at_least(std::max(lanes, 1));
    const int heads = std::min(kWarp / LH, pow2_at_least(H));
    G = LH * heads;
    head_blocks = (H + heads - 1) / heads;
  }
};

// The graph's uncut rows in its row order, or with `transposed` its transpose's.
Segments uncut_rows_of(const Graph& graph, bool transposed) {
  const Tensor& row_ptr = transposed ? graph.t_row_ptr() : graph.row_ptr();
  const Tensor& order = transposed ? graph.t_row_order() : graph.row_order();
  return {row_ptr.data<int32_t>(), order.data<int32_t>(), nullptr, nullptr, order.numel(), 0};
}
// Every row of the graph, in index order.
Segments all_rows_of(const Graph& graph) {
  return {graph.row_ptr().data<int32_t>(), nullptr, nullptr, nullptr, graph.num_dst_nodes(), 0};
}
// The chunks of the graph's long rows, or with `transposed` of its transpose's long rows.
Segments chunks_of(const Graph& graph, bool transposed) {
  const Tensor& row_ptr = transposed ? graph.t_row_ptr() : graph.row_ptr();
  const ChunkRows rows = chunk_rows(graph, transposed);
  return {row_ptr.data<int32_t>(), nullptr, rows.ptr, rows.row, rows.chunks, graph.chunk_edges()};
}

template <class T>
Gatv2Args<T> gatv2_args(const Tensor& xl, const Tensor& xr, const Tensor& att, double negative_slope,
                        const DropoutKey& attn_dropout, const Tensor& edge_term) {
  return {xl.data<T>(),
          xr.data<T>(),
          att.data<T>(),
          edge_term.defined() ? edge_term.data<T>() : nullptr,
          static_cast<int>(xl.size(1)),
          static_cast<int>(xl.size(2)),
          static_cast<int>(gatv2_sign_head_bits(xl.size(2))),
          static_cast<int>(gatv2_sign_words(xl.size(1), xl.size(2))),
          static_cast<T>(negative_slope),
          attn_dropout,
          drop_scale<T>(attn_dropout)};
}

// Runs f(Int<VEC>{}, Int<LH>{}, layout) for the op's vector width and lanes per head: GAT's
// choice (with_gather_vec, for `rows` rows of a launch), so that at 8 heads of 8 f32 features on
// a large graph a lane holds a whole head (LH = 1): the score, da and the dropout decisions cost
// no butterfly, and a warp walks 4 rows, not 2. f64 takes LH = 0 (HeadGroupLane: the kernels
// work out layout.LH themselves).
template <class T, class Fn>
void with_layout(const char* op, long long rows, int H, int F, std::initializer_list<const void*> ptrs,
                 Fn&& f) {
  with_gather_vec<T>(rows, H, F, ptrs, [&](auto vec) {
    const HeadLayout layout(op, H, F, decltype(vec)::value);
    if constexpr (decltype(vec)::value == 8)
      f(vec, Int<1>{}, layout);  // F = 8
    else if constexpr (std::is_same_v<T, double>)
      f(vec, Int<0>{}, layout);
    else
      with_group(layout.LH, [&](auto lh) { f(vec, lh, layout); });
  });
}

// The sum over chunks of long rows' partials (W, H, F) into dest (N, H, F), in chunk order.
template <class T, int VEC>
void merge_chunk_sums(const ChunkRows& rows, const Tensor& part, T* dest, int H, int F) {
  const Tiling tiling(H * F, VEC);
  value_grad_merge_kernel<T, VEC>
      <<<group_blocks(rows.chunks * tiling.tiles, tiling.G), kThreads, 0, cuda::stream()>>>(
          rows, part.data<T>(), dest, nullptr, nullptr, H, F, tiling.tiles, tiling.G);
  CUDA_CHECK_LAUNCH("value_grad_merge_kernel");
}

// The forward's scores and signs as the kernels write them (both null: not saved).
template <class T>
SavedEdges<T> saved_edges(Tensor* scores, Tensor* signs) {
  return {scores ? scores->data<T>() : nullptr, signs ? signs->data<int32_t>() : nullptr};
}

// The scores of every edge (and with saved.signs their signs), a group per (row, block of heads)
// over all rows in index order. Called with E > 0, H > 0 and F > 0.
template <class T>
void launch_scores(const char* op, const Graph& graph, const Gatv2Args<T>& a, const SavedEdges<T>& saved) {
  // The forward's choice of layout (the same rows and inputs; the out that the op allocates is
  // as aligned), so the forward's bits.
  // (with_layout's vectors and layout; LH = 0 whatever layout.LH, gatv2_scores_kernel).
  with_gather_vec<T>(graph.num_dst_nodes(), a.H, a.F, {a.xl, a.xr, a.att, a.et}, [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    const HeadLayout layout(op, a.H, a.F, VEC);
    gatv2_scores_kernel<T, VEC, 0>
        <<<group_blocks(graph.num_dst_nodes() * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
            a, all_rows_of(graph), graph.edge_src().data<int32_t>(), layout.G, layout.head_blocks, saved);
    CUDA_CHECK_LAUNCH("gatv2_scores_kernel");
  });
}

}  // namespace

void gatv2_attention_aggregate_forward(const Gatv2AttentionForwardArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor &xl = args.xl, &xr = args.xr, &att = args.att, &edge_term = args.edge_term;
  Tensor &out = *args.out, &lse = *args.lse;
  const long long Nd = graph.num_dst_nodes(), E = graph.num_edges();
  const int H = static_cast<int>(xl.size(1)), F = static_cast<int>(xl.size(2));
  if (Nd == 0 || H == 0) return;
  if (F == 0) {  // every score is 0: the log-sum-exp of zeros (and an empty out)
    const Tensor zeros = Tensor::zeros({E, int64_t{H}}, xl.dtype(), Device::cuda);
    CsrSoftmaxAggregateForwardArgs uniform;
    uniform.graph = &graph;
    uniform.edge_scores = zeros;
    uniform.node_value = xl;
    uniform.attn_dropout = args.attn_dropout;
    uniform.out = &out;
    uniform.lse = &lse;
    csr_softmax_aggregate_forward(uniform);
    if (args.scores) args.scores->zero_();  // the signs hold no words
    return;
  }
  const char* op = "gatv2_attention_aggregate";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const Gatv2Args<T> a = gatv2_args<T>(xl, xr, att, args.negative_slope, args.attn_dropout, edge_term);
    const SavedEdges<T> saved = saved_edges<T>(args.scores, args.signs);
    with_layout<T>(
        op, Nd, H, F, {a.xl, a.xr, a.att, a.et, out.data<T>()},
        [&](auto vec, auto lh, const HeadLayout& layout) {
          constexpr int VEC = decltype(vec)::value, LH = decltype(lh)::value;
          const int chunk = graph.chunk_edges();
          const bool split = graph.max_in_degree() > chunk;
          const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
          const Segments rows = uncut_rows_of(graph, false);
          gatv2_forward_kernel<T, VEC, LH>
              <<<group_blocks(rows.count * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                  a, rows, src, layout.G, layout.head_blocks, saved, out.data<T>(), lse.data<T>(), nullptr,
                  nullptr, nullptr);
          CUDA_CHECK_LAUNCH("gatv2_forward_kernel");
          if (!split) return;
          // Long rows: their chunks' partial states, merged in chunk order.
          const Segments chunks = chunks_of(graph, false);
          const long long W = chunks.count;
          Tensor part_m = Tensor::empty({W, int64_t{H}}, xl.dtype(), Device::cuda, "gatv2 partial m");
          Tensor part_z = Tensor::empty({W, int64_t{H}}, xl.dtype(), Device::cuda, "gatv2 partial z");
          Tensor part_acc =
              Tensor::empty({W, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda, "gatv2 partial acc");
          gatv2_forward_kernel<T, VEC, LH>
              <<<group_blocks(W * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                  a, chunks, src, layout.G, layout.head_blocks, saved, nullptr, nullptr, part_m.data<T>(),
                  part_z.data<T>(), part_acc.data<T>());
          CUDA_CHECK_LAUNCH("gatv2_forward_kernel (chunks)");
          const Tiling tiling(H * F, VEC);
          aggregate_merge_kernel<T, VEC>
              <<<group_blocks(Nd * tiling.tiles, tiling.G), kThreads, 0, cuda::stream()>>>(
                  graph.row_chunk_ptr().data<int32_t>(), part_m.data<T>(), part_z.data<T>(),
                  part_acc.data<T>(), out.data<T>(), lse.data<T>(), Nd, H, F, tiling.tiles, tiling.G);
          CUDA_CHECK_LAUNCH("aggregate_merge_kernel");
        });
  });
}

// D = G . out per (row, head); the forward's scores and signs (or computed here); then the walk
// over the transposed graph for d xl, ds (over the scores) and the sources' part of d att, and
// the pass over the rows for d xr, d edge_term and the rows' part of d att. d att is the sum of
// the launches' group sums (HeadGroupLane), (R, H, F), in a fixed two-stage reduction
// (sum_axis). Called with E > 0 and H F > 0 (kernels:: sees to it).
void gatv2_attention_aggregate_backward(const Gatv2AttentionBackwardArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor &xl = args.xl, &lse = args.lse, &grad_out = args.grad_out;
  Tensor *grad_xl = args.grad_xl, *grad_xr = args.grad_xr, *grad_att = args.grad_att,
         *grad_edge_term = args.grad_edge_term;
  const long long Nd = graph.num_dst_nodes(), E = graph.num_edges();
  const int H = static_cast<int>(xl.size(1)), F = static_cast<int>(xl.size(2));
  const char* op = "gatv2_attention_aggregate backward";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    auto data = [](Tensor* t) { return t ? t->data<T>() : nullptr; };
    const Gatv2Args<T> a =
        gatv2_args<T>(xl, args.xr, args.att, args.negative_slope, args.attn_dropout, args.edge_term);
    Tensor D = Tensor::empty({Nd, int64_t{H}}, xl.dtype(), Device::cuda, "gatv2 row dots");  // (Nd, H)
    head_rows_dot<T>(grad_out.data<T>(), args.out.data<T>(), D.data<T>(), Nd * H, F);
    Tensor scores = args.scores, signs = args.signs;  // scores: s, then ds
    if (!scores.defined()) {
      scores = Tensor::empty({E, int64_t{H}}, xl.dtype(), Device::cuda, "gatv2 scores");
      signs = Tensor::empty({E, gatv2_sign_words(H, F)}, DType::i32, Device::cuda, "gatv2 signs");
      launch_scores<T>(op, graph, a, saved_edges<T>(&scores, &signs));
    }
    const GradArgs<T> b{lse.data<T>(), D.data<T>(), grad_out.data<T>(), scores.data<T>(),
                        signs.data<int32_t>()};
    const bool rows_needed = grad_xr || grad_att || grad_edge_term;
    with_layout<T>(
        op, graph.num_src_nodes(), H, F,
        {a.xl, a.xr, a.att, a.et, b.grad_out, data(grad_xl), data(grad_xr), data(grad_edge_term)},
        [&](auto vec, auto lh, const HeadLayout& layout) {
          constexpr int VEC = decltype(vec)::value, LH = decltype(lh)::value;
          // The launches: the walk's uncut sources, its long sources' chunks, then the same of the
          // rows (when needed); each with its blocks and its first row of d att's group sums.
          struct Launch {
            bool transposed;
            Segments seg;
            unsigned blocks;
            long long att_row;
          };
          std::vector<Launch> launches;
          long long att_rows = 0;
          for (bool transposed : {true, false}) {
            if (!transposed && !rows_needed) break;
            std::vector<Segments> segs{uncut_rows_of(graph, transposed)};
            if ((transposed ? graph.max_out_degree() : graph.max_in_degree()) > graph.chunk_edges())
              segs.push_back(chunks_of(graph, transposed));
            for (const Segments& seg : segs) {
              const unsigned blocks = group_blocks(seg.count * layout.head_blocks, layout.G);
              launches.push_back({transposed, seg, blocks, att_rows});
              att_rows += partial_rows(blocks, layout.G, layout.head_blocks);
            }
          }
          Tensor att_sums;  // (att_rows, H, F): each group's part of d att
          if (grad_att)
            att_sums = Tensor::empty({att_rows, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda,
                                     "gatv2 d att group sums");
          const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();     // (E,)
          const int32_t* t_edge_id = graph.t_edge_id().data<int32_t>();  // (E,)
          for (const Launch& l : launches) {
            T* att = grad_att ? att_sums.data<T>() + l.att_row * H * F : nullptr;
            T* sum = data(l.transposed ? grad_xl : grad_xr);  // (N, H, F) or null
            const bool chunks = l.seg.chunk_ptr != nullptr;
            Tensor part;  // a chunk launch's partial sums (W, H, F)
            if (chunks && sum)
              part = Tensor::empty({l.seg.count, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda,
                                   "gatv2 chunk partials");
            T* out = chunks ? (sum ? part.data<T>() : nullptr) : sum;
            if (l.transposed) {
              gatv2_source_grad_kernel<T, VEC, LH><<<l.blocks, kThreads, 0, cuda::stream()>>>(
                  a, b, l.seg, t_dst, t_edge_id, layout.G, layout.head_blocks, rows_needed, out, att);
              CUDA_CHECK_LAUNCH("gatv2_source_grad_kernel");
            } else {
              gatv2_row_grad_kernel<T, VEC, LH><<<l.blocks, kThreads, 0, cuda::stream()>>>(
                  a, l.seg, b.scores_ds, b.signs, layout.G, layout.head_blocks, out, att,
                  data(grad_edge_term));
              CUDA_CHECK_LAUNCH("gatv2_row_grad_kernel");
            }
            if (chunks && sum) merge_chunk_sums<T, VEC>(chunk_rows(graph, l.transposed), part, sum, H, F);
          }
          if (grad_att) sum_axis(att_sums, 1, att_rows, int64_t{H} * F, *grad_att);
        });
  });
}

void gatv2_edge_scores(const Gatv2EdgeScoresArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor& xl = args.xl;
  Tensor& scores = *args.scores;
  const int H = static_cast<int>(xl.size(1)), F = static_cast<int>(xl.size(2));
  if (graph.num_edges() == 0 || H == 0) return;
  if (F == 0) {  // an empty sum
    scores.zero_();
    return;
  }
  const char* op = "gatv2_edge_scores";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    launch_scores<T>(op, graph,
                     gatv2_args<T>(xl, args.xr, args.att, args.negative_slope, DropoutKey{}, args.edge_term),
                     saved_edges<T>(&scores, nullptr));
  });
}

}  // namespace gat::ops::cuda_impl
