// CUDA kernels of gatv2_attention_aggregate. The schedule (a group of lanes per (row, block of
// heads) with the online softmax, the score's sum over a head's lanes, chunks of long rows, the
// two backward walks) is described in docs/kernels.md. No float atomics: every sum has a fixed
// order, so results are bitwise reproducible.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

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

// The op's inputs as the kernels read them.
template <class T>
struct Gatv2Args {
  const T* __restrict__ xl;   // (Ns, H, F)
  const T* __restrict__ xr;   // (Nd, H, F)
  const T* __restrict__ att;  // (H, F)
  const T* __restrict__ et;   // (E, H, F) or null
  int H, F;
  T slope;  // negative_slope
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
// G is a launch argument, LH a template one (the sums' butterflies are unrolled).
template <int LH>
struct HeadGroupLane {
  long long first_item;  // this group's first item
  long long stride;      // items per grid-stride round
  int head;              // the lane's head within the item's block of heads
  int c;                 // the lane's first feature within its head
  __device__ HeadGroupLane(int G, int VEC) {
    const int lane = threadIdx.x % kWarp, groups = kWarp / G;
    first_item = warps::warp_id() * groups + lane / G;
    stride = warps::warp_count() * groups;
    head = (lane % G) / LH;
    c = (lane % LH) * VEC;
  }
};

// A work item as one lane sees it: segment n (row `row`'s entries [begin, end), or chunk n's of
// a long row), the lane's head, lane_offset = head F + c (the lane's first feature within a node's
// H F), whether the lane has features (c < F) and whether it is the head's first lane (c = 0).
// A lane of the last block past the H heads takes head H - 1 without features and not first: it
// follows its group (whose lanes draw the dropout decisions together) and writes nothing.
struct LaneItem {
  long long n, row, begin, end, lane_offset, HF;
  long long sums;             // where the segment's sums go: its row, or a chunk's own index
  int head;                   // the lane's head (of the H)
  int first_head, last_head;  // the heads of the lane's group
  bool has, first;
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
template <int LH, int VEC, class Fn>
__device__ __forceinline__ void for_each_item(const Segments& seg, int G, int head_blocks, int H, int F,
                                              Fn&& f) {
  const HeadGroupLane<LH> g(G, VEC);
  for (long long item = g.first_item; item < seg.count * head_blocks; item += g.stride) {
    LaneItem it;
    it.n = item / head_blocks;
    it.first_head = static_cast<int>(item - it.n * head_blocks) * (G / LH);
    it.last_head = min(H, it.first_head + G / LH) - 1;
    it.head = it.first_head + g.head;
    seg.get(it.n, it.row, it.begin, it.end);
    it.sums = seg.chunk_ptr ? it.n : it.row;
    const bool exists = it.head < H;
    if (!exists) it.head = H - 1;
    it.lane_offset = static_cast<long long>(it.head) * F + g.c;
    it.HF = static_cast<long long>(H) * F;
    it.has = exists && g.c < F, it.first = exists && g.c == 0;
    f(it);
  }
}

template <class T>
__device__ __forceinline__ T leaky(T x, T slope) {
  return x > T(0) ? x : slope * x;
}
template <class T>
__device__ __forceinline__ T leaky_slope(T x, T slope) {
  return x > T(0) ? T(1) : slope;
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

// The score s[e,h] of the lane's head for edge e: its lanes' parts summed by a fixed butterfly
// (every lane gets the same bits); x as score_part.
template <class T, int VEC, int LH>
__device__ __forceinline__ T head_score(const Gatv2Args<T>& a, const Vec<T, VEC>& l, const Vec<T, VEC>& r,
                                        const Vec<T, VEC>& at, const LaneItem& it, long long e, T (&x)[VEC]) {
  return warps::group_sum<LH>(score_part(l, r, it.has && a.et ? a.et + it.at(e) : nullptr, at, a.slope, x));
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
// segments their partial (m, z, acc), merged by aggregate_merge_kernel.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_forward_kernel(Gatv2Args<T> a, Segments seg,
                         const int32_t* __restrict__ src,  // (E,)
                         int G, int head_blocks,
                         T* __restrict__ out,       // (Nd, H, F)   (row segments)
                         T* __restrict__ lse,       // (Nd, H)      (row segments)
                         T* __restrict__ part_m,    // (W, H)       (chunk segments)
                         T* __restrict__ part_z,    // (W, H)       (chunk segments)
                         T* __restrict__ part_acc)  // (W, H, F)    (chunk segments)
{
  SegmentKeep keep(a.key, G);
  for_each_item<LH, VEC>(seg, G, head_blocks, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    OnlineState<T, VEC> st;
    for (long long window_begin = it.begin; window_begin < it.end;) {
      const ConsecutiveEdges window(keep, window_begin, it.end, a.H, it.first_head, it.last_head);
      for (long long e = window.begin; e < window.end; ++e) {
        const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, src[e]);
        T x[VEC];
        st.add(head_score<T, VEC, LH>(a, l, r, at, it, e, x), window.factor(keep, e, it.head, a.scale), l);
      }
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

// What the backward recomputes for edge e = (j -> i) and head h from the lane's vectors, the
// same in both walks: the score s, a = exp(s - lse[i,h]), da = keep / (1 - p)
// G[i,h,:].xl[j,h,:] (a sum over the head's lanes; `drop` the keep factor) and ds = a (da - D[i,h]).
template <class T>
struct EdgeGrad {
  T a, drop, ds;
};
template <class T, int VEC, int LH>
__device__ __forceinline__ EdgeGrad<T> edge_grad(const Gatv2Args<T>& args, const LaneItem& it, long long e,
                                                 const Vec<T, VEC>& l, const Vec<T, VEC>& r,
                                                 const Vec<T, VEC>& gi, const Vec<T, VEC>& at, T lse_ih,
                                                 T D_ih, T drop, T (&x)[VEC]) {
  const T s = head_score<T, VEC, LH>(args, l, r, at, it, e, x);
  const T dot = warps::group_sum<LH>(dot_part(gi, l));
  EdgeGrad<T> g;
  g.a = exp(s - lse_ih);
  g.drop = drop;
  g.ds = g.a * (dot * g.drop - D_ih);
  return g;
}

// The tensors of the backward besides the inputs.
template <class T>
struct GradArgs {
  const T* __restrict__ lse;       // (Nd, H)
  const T* __restrict__ D;         // (Nd, H): G[i,h,:].out[i,h,:]
  const T* __restrict__ grad_out;  // (Nd, H, F)
};

// Backward, d xl: one group per (segment of a source's out-edges, block of heads) over the
// transposed graph, xl[j] in registers; per entry (edge e, destination i) it gathers xr[i], G[i]
// and et[e], recomputes the edge and adds a~ G[i] + ds att LeakyReLU'(x). Row segments write
// d xl[j], chunk segments a partial (W, H, F), summed by value_grad_merge_kernel.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_source_grad_kernel(Gatv2Args<T> a, GradArgs<T> b, Segments seg,
                             const int32_t* __restrict__ t_dst,      // (E,)
                             const int32_t* __restrict__ t_edge_id,  // (E,)
                             int G, int head_blocks,
                             T* __restrict__ dest)  // d xl (Ns, H, F) by row, or chunk partials (W, H, F)
{
  SegmentKeep keep(a.key, G);
  for_each_item<LH, VEC>(seg, G, head_blocks, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    T acc[VEC] = {};
    for (long long window_begin = it.begin; window_begin < it.end;) {
      const ScatteredEdges window(keep, t_edge_id, window_begin, it.end, a.H, it.first_head, it.last_head);
      for (long long k = window.begin; k < window.end; ++k) {
        const long long e = t_edge_id[k], i = t_dst[k];
        const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, i), gi = it.lane_vec<T, VEC>(b.grad_out, i);
        T x[VEC];
        const EdgeGrad<T> d =
            edge_grad<T, VEC, LH>(a, it, e, l, r, gi, at, b.lse[it.head_at(i, a.H)], b.D[it.head_at(i, a.H)],
                                  window.factor(keep, k, e, it.head, a.scale), x);
        const T kept = d.a * d.drop;
#pragma unroll
        for (int q = 0; q < VEC; ++q) acc[q] += kept * gi.v[q] + d.ds * at.v[q] * leaky_slope(x[q], a.slope);
      }
      window_begin = window.end;
    }
    if (it.has) store_vec<T, VEC>(dest + it.at(it.sums), to_vec(acc));
  });
}

// Backward, d xr, d edge_term and d att's per-row terms: one group per (segment of a row, block
// of heads) over the CSR, xr[i] and G[i] in registers; per edge it gathers xl[j] and et[e],
// recomputes the edge, t = ds att LeakyReLU'(x): d edge_term[e] = t, d xr[i] += t and the row's
// d att term += ds LeakyReLU(x). Row segments write d xr[i] and the term (Nd, H, F), chunk
// segments partials (W, H, F) summed by value_grad_merge_kernel. Any output may be null.
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads)
    gatv2_row_grad_kernel(Gatv2Args<T> a, GradArgs<T> b, Segments seg,
                          const int32_t* __restrict__ src,  // (E,)
                          int G, int head_blocks,
                          T* __restrict__ dxr,       // (Nd, H, F) by row, (W, H, F) by chunk, or null
                          T* __restrict__ att_term,  // as dxr
                          T* __restrict__ det)       // (E, H, F) or null
{
  SegmentKeep keep(a.key, G);
  for_each_item<LH, VEC>(seg, G, head_blocks, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), gi = it.lane_vec<T, VEC>(b.grad_out, it.row);
    const Vec<T, VEC> at = it.lane_vec<T, VEC>(a.att, 0);
    const T lse_ih = b.lse[it.head_at(it.row, a.H)], D_ih = b.D[it.head_at(it.row, a.H)];
    T acc_r[VEC] = {}, acc_att[VEC] = {};
    for (long long window_begin = it.begin; window_begin < it.end;) {
      const ConsecutiveEdges window(keep, window_begin, it.end, a.H, it.first_head, it.last_head);
      for (long long e = window.begin; e < window.end; ++e) {
        const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, src[e]);
        T x[VEC];
        const EdgeGrad<T> d = edge_grad<T, VEC, LH>(a, it, e, l, r, gi, at, lse_ih, D_ih,
                                                    window.factor(keep, e, it.head, a.scale), x);
        T t[VEC];
#pragma unroll
        for (int q = 0; q < VEC; ++q) {
          t[q] = d.ds * at.v[q] * leaky_slope(x[q], a.slope);
          acc_r[q] += t[q];
          acc_att[q] += d.ds * leaky(x[q], a.slope);
        }
        if (det && it.has) store_vec<T, VEC>(det + it.at(e), to_vec(t));
      }
      window_begin = window.end;
    }
    if (!it.has) return;
    if (dxr) store_vec<T, VEC>(dxr + it.at(it.sums), to_vec(acc_r));
    if (att_term) store_vec<T, VEC>(att_term + it.at(it.sums), to_vec(acc_att));
  });
}

// The scores alone: one group per (row, block of heads), the head's first lane writes s[e,h].
template <class T, int VEC, int LH>
__global__ void __launch_bounds__(kThreads) gatv2_scores_kernel(Gatv2Args<T> a, Segments seg,
                                                                const int32_t* __restrict__ src,  // (E,)
                                                                int G, int head_blocks,
                                                                T* __restrict__ scores)  // (E, H)
{
  for_each_item<LH, VEC>(seg, G, head_blocks, a.H, a.F, [&](const LaneItem& it) {
    const Vec<T, VEC> r = it.lane_vec<T, VEC>(a.xr, it.row), at = it.lane_vec<T, VEC>(a.att, 0);
    for (long long e = it.begin; e < it.end; ++e) {
      const Vec<T, VEC> l = it.lane_vec<T, VEC>(a.xl, src[e]);
      T x[VEC];
      const T s = head_score<T, VEC, LH>(a, l, r, at, it, e, x);
      if (it.first) scores[it.head_at(e, a.H)] = s;
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
          static_cast<T>(negative_slope),
          attn_dropout,
          drop_scale<T>(attn_dropout)};
}

// Runs f(Int<VEC>{}, Int<LH>{}, layout) for the op's vector width and lanes per head.
template <class T, class Fn>
void with_layout(const char* op, int H, int F, std::initializer_list<const void*> ptrs, Fn&& f) {
  with_vec<T>(F, ptrs, [&](auto vec) {
    const HeadLayout layout(op, H, F, decltype(vec)::value);
    with_group(layout.LH, [&](auto lh) { f(vec, lh, layout); });
  });
}

// The sum over chunks of long rows' partials (W, H, F) into dest (N, H, F), in chunk order.
template <class T, int VEC>
void merge_chunk_sums(const ChunkRows& rows, const Tensor& part, T* dest, int H, int F) {
  const Tiling tiling(H * F, VEC);
  with_group(tiling.G, [&](auto group) {
    constexpr int GM = decltype(group)::value;
    value_grad_merge_kernel<T, VEC, GM>
        <<<group_blocks(rows.chunks * tiling.tiles, GM), kThreads, 0, cuda::stream()>>>(
            rows, part.data<T>(), dest, nullptr, nullptr, H, F, tiling.tiles);
    CUDA_CHECK_LAUNCH("value_grad_merge_kernel");
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
    return;
  }
  const char* op = "gatv2_attention_aggregate";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const Gatv2Args<T> a = gatv2_args<T>(xl, xr, att, args.negative_slope, args.attn_dropout, edge_term);
    with_layout<T>(
        op, H, F, {a.xl, a.xr, a.att, a.et, out.data<T>()}, [&](auto vec, auto lh, const HeadLayout& layout) {
          constexpr int VEC = decltype(vec)::value, LH = decltype(lh)::value;
          const int chunk = graph.chunk_edges();
          const bool split = graph.max_in_degree() > chunk;
          const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
          const Segments rows = uncut_rows_of(graph, false);
          gatv2_forward_kernel<T, VEC, LH>
              <<<group_blocks(rows.count * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                  a, rows, src, layout.G, layout.head_blocks, out.data<T>(), lse.data<T>(), nullptr, nullptr,
                  nullptr);
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
                  a, chunks, src, layout.G, layout.head_blocks, nullptr, nullptr, part_m.data<T>(),
                  part_z.data<T>(), part_acc.data<T>());
          CUDA_CHECK_LAUNCH("gatv2_forward_kernel (chunks)");
          const Tiling tiling(H * F, VEC);
          with_group(tiling.G, [&](auto group) {
            constexpr int GM = decltype(group)::value;
            aggregate_merge_kernel<T, VEC, GM>
                <<<group_blocks(Nd * tiling.tiles, GM), kThreads, 0, cuda::stream()>>>(
                    graph.row_chunk_ptr().data<int32_t>(), part_m.data<T>(), part_z.data<T>(),
                    part_acc.data<T>(), out.data<T>(), lse.data<T>(), Nd, H, F, tiling.tiles);
            CUDA_CHECK_LAUNCH("aggregate_merge_kernel");
          });
        });
  });
}

// D = G . out per (row, head); then the walk over the transposed graph for d xl and the walk over
// the rows for d xr, d edge_term and d att's per-row terms, whose sum over the rows is a fixed
// two-stage reduction (sum_axis). Called with E > 0 and H F > 0 (kernels:: sees to it).
void gatv2_attention_aggregate_backward(const Gatv2AttentionBackwardArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor &xl = args.xl, &xr = args.xr, &att = args.att, &edge_term = args.edge_term;
  const double negative_slope = args.negative_slope;
  const DropoutKey& attn_dropout = args.attn_dropout;
  const Tensor &out = args.out, &lse = args.lse, &grad_out = args.grad_out;
  Tensor *grad_xl = args.grad_xl, *grad_xr = args.grad_xr, *grad_att = args.grad_att,
         *grad_edge_term = args.grad_edge_term;
  const long long Nd = graph.num_dst_nodes(), Ns = graph.num_src_nodes();
  const int H = static_cast<int>(xl.size(1)), F = static_cast<int>(xl.size(2));
  const char* op = "gatv2_attention_aggregate backward";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    auto data = [](Tensor* t) { return t ? t->data<T>() : nullptr; };
    const Gatv2Args<T> a = gatv2_args<T>(xl, xr, att, negative_slope, attn_dropout, edge_term);
    Tensor D = Tensor::empty({Nd, int64_t{H}}, xl.dtype(), Device::cuda, "gatv2 row dots");  // (Nd, H)
    head_rows_dot<T>(grad_out.data<T>(), out.data<T>(), D.data<T>(), Nd * H, F);
    const GradArgs<T> b{lse.data<T>(), D.data<T>(), grad_out.data<T>()};
    const int chunk = graph.chunk_edges();
    with_layout<T>(
        op, H, F, {a.xl, a.xr, a.att, a.et, b.grad_out, data(grad_xl), data(grad_xr), data(grad_edge_term)},
        [&](auto vec, auto lh, const HeadLayout& layout) {
          constexpr int VEC = decltype(vec)::value, LH = decltype(lh)::value;
          if (grad_xl) {
            const bool split = graph.max_out_degree() > chunk;
            const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();     // (E,)
            const int32_t* t_edge_id = graph.t_edge_id().data<int32_t>();  // (E,)
            const Segments sources = uncut_rows_of(graph, true);
            gatv2_source_grad_kernel<T, VEC, LH>
                <<<group_blocks(sources.count * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                    a, b, sources, t_dst, t_edge_id, layout.G, layout.head_blocks, grad_xl->data<T>());
            CUDA_CHECK_LAUNCH("gatv2_source_grad_kernel");
            if (split) {
              const Segments chunks = chunks_of(graph, true);
              const long long W = chunks.count;
              Tensor part =
                  Tensor::empty({W, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda, "gatv2 d xl partials");
              gatv2_source_grad_kernel<T, VEC, LH>
                  <<<group_blocks(W * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                      a, b, chunks, t_dst, t_edge_id, layout.G, layout.head_blocks, part.data<T>());
              CUDA_CHECK_LAUNCH("gatv2_source_grad_kernel (chunks)");
              merge_chunk_sums<T, VEC>(chunk_rows(graph, true), part, grad_xl->data<T>(), H, F);
            }
          }
          if (!grad_xr && !grad_att && !grad_edge_term) return;
          Tensor att_terms;  // (Nd, H, F): each row's part of d att
          if (grad_att)
            att_terms =
                Tensor::empty({Nd, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda, "gatv2 d att rows");
          const bool split = graph.max_in_degree() > chunk;
          const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
          const Segments rows = uncut_rows_of(graph, false);
          gatv2_row_grad_kernel<T, VEC, LH>
              <<<group_blocks(rows.count * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                  a, b, rows, src, layout.G, layout.head_blocks, data(grad_xr),
                  grad_att ? att_terms.data<T>() : nullptr, data(grad_edge_term));
          CUDA_CHECK_LAUNCH("gatv2_row_grad_kernel");
          if (split) {
            const Segments chunks = chunks_of(graph, false);
            const long long W = chunks.count;
            Tensor part_r, part_att;  // (W, H, F)
            if (grad_xr)
              part_r =
                  Tensor::empty({W, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda, "gatv2 d xr partials");
            if (grad_att)
              part_att = Tensor::empty({W, int64_t{H}, int64_t{F}}, xl.dtype(), Device::cuda,
                                       "gatv2 d att partials");
            gatv2_row_grad_kernel<T, VEC, LH>
                <<<group_blocks(W * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
                    a, b, chunks, src, layout.G, layout.head_blocks, grad_xr ? part_r.data<T>() : nullptr,
                    grad_att ? part_att.data<T>() : nullptr, data(grad_edge_term));
            CUDA_CHECK_LAUNCH("gatv2_row_grad_kernel (chunks)");
            if (grad_xr) merge_chunk_sums<T, VEC>(chunk_rows(graph, false), part_r, grad_xr->data<T>(), H, F);
            if (grad_att)
              merge_chunk_sums<T, VEC>(chunk_rows(graph, false), part_att, att_terms.data<T>(), H, F);
          }
          if (grad_att) sum_axis(att_terms, 1, Nd, int64_t{H} * F, *grad_att);
        });
  });
}

void gatv2_edge_scores(const Gatv2EdgeScoresArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor &xl = args.xl, &xr = args.xr, &att = args.att, &edge_term = args.edge_term;
  const double negative_slope = args.negative_slope;
  Tensor& scores = *args.scores;
  const long long Nd = graph.num_dst_nodes(), E = graph.num_edges();
  const int H = static_cast<int>(xl.size(1)), F = static_cast<int>(xl.size(2));
  if (E == 0 || H == 0) return;
  if (F == 0) {  // an empty sum
    scores.zero_();
    return;
  }
  const char* op = "gatv2_edge_scores";
  dispatch_float(xl.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const Gatv2Args<T> a = gatv2_args<T>(xl, xr, att, negative_slope, DropoutKey{}, edge_term);
    with_layout<T>(op, H, F, {a.xl, a.xr, a.att, a.et}, [&](auto vec, auto lh, const HeadLayout& layout) {
      constexpr int VEC = decltype(vec)::value, LH = decltype(lh)::value;
      gatv2_scores_kernel<T, VEC, LH>
          <<<group_blocks(Nd * layout.head_blocks, layout.G), kThreads, 0, cuda::stream()>>>(
              a, all_rows_of(graph), graph.edge_src().data<int32_t>(), layout.G, layout.head_blocks,
              scores.data<T>());
      CUDA_CHECK_LAUNCH("gatv2_scores_kernel");
    });
  });
}

}  // namespace gat::ops::cuda_impl
