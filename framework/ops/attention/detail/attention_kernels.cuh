// Device helpers and kernels shared by the fused attention ops' CUDA code (csr_softmax_aggregate,
// gat_attention_aggregate, gatv2_attention_aggregate): vectors of VEC features, the dropout keep
// factor, a group's lanes, the online-softmax state, writing a row, finding a chunk's row, the
// merges of chunk partials, and the host side's launch shapes. Included by framework/ops/*.cu only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "gat/framework/bfloat16.h"
#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/detail/activations.cuh"
#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/detail/graph_kernels.cuh"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/rng.h"

namespace gat::ops::cuda_impl::attention {

using warps::kWarp;

constexpr unsigned kThreads = 256;

template <int N>
using Int = std::integral_constant<int, N>;

using detail::load_vec;
using detail::store_vec;
using detail::Vec;

// Storage and arithmetic (docs/precision.md). A kernel's template type S is the dtype of the rows
// it reads and writes: f32 and f64 are computed in themselves, bf16 in f32 (Compute<S>). Every
// sum and what an op keeps per node (lse, pos_weight, the chunks' partials) are Compute<S>; a
// bf16 row is widened as it is loaded and rounded once as it is stored. For f32 and f64 the
// helpers below are the plain loads and stores, so those kernels are the code they were.
// (Compute is the op layer's opmath_t, framework/ops/detail/convert.h.)
template <class S>
using Compute = detail::opmath_t<S>;

template <class S>
__device__ __forceinline__ Compute<S> widen(S x) {
  if constexpr (std::is_same_v<S, bf16>)
    return to_f32(x);
  else
    return x;
}
template <class S>
__device__ __forceinline__ S narrow(Compute<S> x) {
  if constexpr (std::is_same_v<S, bf16>)
    return to_bf16(x);
  else
    return x;
}

// bf16 rows only: the rounding error of GAT's bf16 output, out_low = out_f32 - out (each value
// the f32 result less its bf16 rounding), itself in bf16 (N, H, F). The backward reads out +
// out_low, the f32 output to about 2^-17 of each value: its D = G . out and the activation's
// gradient are then those of the f32 output, where the rounded output alone put a bf16 rounding
// into d el, d er and d edge_term (docs/precision.md). An empty base for f32 and f64, whose
// output is exact in its own type: their structs, and so their kernels' parameters, are unchanged.
template <class S>
struct OutputLow {};
template <>
struct OutputLow<bf16> {
  bf16* out_low = nullptr;  // (N, H, F) or null
};
template <class S>
constexpr bool kHasOutputLow = std::is_same_v<S, bf16>;

// VEC bf16 as one unsigned access: 8 in 16 bytes (twice the values of a float4), 4 in 8, 2 in 4.
template <int VEC>
using Bf16Word = std::conditional_t<VEC == 8, uint4, std::conditional_t<VEC == 4, uint2, unsigned>>;

// VEC stored values [p, p + VEC), widened, by one load (p aligned to the VEC values).
template <class S, int VEC>
__device__ __forceinline__ Vec<Compute<S>, VEC> load_row(const S* p) {
  if constexpr (!std::is_same_v<S, bf16>) {
    return load_vec<S, VEC>(p);
  } else if constexpr (VEC == 1) {
    return {{to_f32(*p)}};
  } else {
    static_assert(VEC == 2 || VEC == 4 || VEC == 8, "bf16 vectors of 2, 4 or 8");
    const Bf16Word<VEC> word = *reinterpret_cast<const Bf16Word<VEC>*>(p);
    unsigned u[VEC / 2];
    memcpy(u, &word, sizeof word);
    Vec<float, VEC> x;
#pragma unroll
    for (int q = 0; q < VEC / 2; ++q) {  // the lower half of a word is the first value
      x.v[2 * q] = __uint_as_float(u[q] << 16);
      x.v[2 * q + 1] = __uint_as_float(u[q] & 0xFFFF0000u);
    }
    return x;
  }
}

// x rounded to S (to nearest even, as the CPU rounds) and stored at [p, p + VEC) by one store.
template <class S, int VEC>
__device__ __forceinline__ void store_row(S* p, const Vec<Compute<S>, VEC>& x) {
  if constexpr (!std::is_same_v<S, bf16>) {
    store_vec<S, VEC>(p, x);
  } else if constexpr (VEC == 1) {
    *p = to_bf16(x.v[0]);
  } else {
    unsigned u[VEC / 2];
#pragma unroll
    for (int q = 0; q < VEC / 2; ++q)
      u[q] = to_bf16(x.v[2 * q]).bits | static_cast<unsigned>(to_bf16(x.v[2 * q + 1]).bits) << 16;
    Bf16Word<VEC> word;
    memcpy(&word, u, sizeof word);
    *reinterpret_cast<Bf16Word<VEC>*>(p) = word;
  }
}

// x less its rounding to S, the part of x that storing it in S loses (zero for f32 and f64).
template <class S, int VEC>
__device__ __forceinline__ Vec<Compute<S>, VEC> rounding_error(const Vec<Compute<S>, VEC>& x) {
  Vec<Compute<S>, VEC> r;
#pragma unroll
  for (int k = 0; k < VEC; ++k) r.v[k] = x.v[k] - widen(narrow<S>(x.v[k]));
  return r;
}

template <class T, int VEC>
__device__ __forceinline__ Vec<T, VEC> to_vec(const T (&a)[VEC]) {
  Vec<T, VEC> v;
#pragma unroll
  for (int k = 0; k < VEC; ++k) v.v[k] = a[k];
  return v;
}

// Attention dropout's decisions for the (edge, head) pairs that a segment of lanes visits
// together, each Philox block drawn once for the segment instead of once per lane and edge.
// Philox4x32-10 is some 80 instructions, and a row of 8 heads x 8 features has 16 lanes that each
// drew a block per edge while the edge's 8 heads take 2 blocks: 8 draws of every block, the larger
// part of the forward's and the backward walk's instructions. Pair (e, h) keeps by word
// (e*H + h) & 3 of block (e*H + h) >> 2 as in DropoutKey::keep, so the decisions are the same.
// The segment is `width` converged lanes (a power of two, aligned in the warp). A window of edges
// numbers the blocks it needs by slot; lane s % width draws slot s into nibble s / width of its
// word (keep4; at most kSlotsPerLane slots a lane), and a lane reads a pair's decision from the
// lane that drew it. Inactive dropout draws nothing and every factor is 1.
struct SegmentKeep {
  static constexpr int kSlotsPerLane = 8;  // nibbles of a 32-bit word
  DropoutKey key;  // its stream resolved once (no read of a graph's stream base per draw)
  int width, lane;
  int width_log2;      // width = 1 << width_log2: slot / width is a shift, not a division
  unsigned mask;       // the segment's lanes in the warp
  unsigned drawn = 0;  // this lane's slots' decisions, a nibble each

  __device__ SegmentKeep(const DropoutKey& key, int width) : key(key.resolved()), width(width) {
    width_log2 = __ffs(width) - 1;
    const int warp_lane = threadIdx.x % kWarp;
    lane = warp_lane & (width - 1);
    mask = (width == kWarp ? 0xffffffffu : (1u << width) - 1) << (warp_lane - lane);
  }
  __device__ __forceinline__ int max_slots() const { return kSlotsPerLane * width; }
  // Draws slots [0, slots) of a window, slot s being Philox block block_of(s). A lane calls
  // block_of for its slots in order (lane, lane + width, ...), so it may keep state.
  template <class BlockOf>
  __device__ __forceinline__ void draw(int slots, BlockOf&& block_of) {
    drawn = 0;
#pragma unroll 1
    for (int r = 0, s = lane; r < kSlotsPerLane && s < slots; ++r, s += width)
      drawn |= key.keep4(static_cast<uint64_t>(block_of(s))) << (4 * r);
  }
  // keep / (1 - p) or 0 for word `word` of slot `slot` (scale = 1 / (1 - p)).
  template <class T>
  __device__ __forceinline__ T factor(int slot, int word, T scale) const {
    const unsigned bits = __shfl_sync(mask, drawn, slot & (width - 1), width);
    return (bits >> (4 * (slot >> width_log2) + word)) & 1u ? scale : T(0);
  }
};

// A window of consecutive edges [begin, end) of a row whose pairs with heads [h0, h1] a segment
// draws: slot s is block first_block + s. The window ends where the slots would run out.
// Pair (e, h) is index e*H + h; its offset from the window's first block, rel = e*H + h -
// 4 first_block, is formed in 32 bits from e - begin (slot rel >> 2, word rel & 3).
struct ConsecutiveEdges {
  long long begin, end, first_block;
  int H;
  int offset;  // rel - ((e - begin) H + h) = ((begin H + h0) & 3) - h0
  __device__ __forceinline__ ConsecutiveEdges(SegmentKeep& keep, long long begin, long long row_end, int H,
                                              int h0, int h1)
      : begin(begin), H(H) {
    if (!keep.key.active()) {
      end = row_end, first_block = 0, offset = 0;
      return;
    }
    const int first_word = static_cast<int>((begin * H + h0) & 3);
    first_block = (begin * H + h0) >> 2;
    offset = first_word - h0;
    // The last edge whose pair (e, h1) still falls in the segment's blocks: rel of (e, h1) at
    // most 4 max_slots - 1.
    const int last_rel = 4 * keep.max_slots() - 1 - (h1 - h0) - first_word;
    end = min(row_end, begin + static_cast<unsigned>(last_rel) / static_cast<unsigned>(H) + 1);
    const long long b = first_block;
    keep.draw(static_cast<int>((((end - 1) * H + h1) >> 2) - b + 1), [b](int s) { return b + s; });
  }
  template <class T>
  __device__ __forceinline__ T factor(const SegmentKeep& keep, long long e, int h, T scale) const {
    if (!keep.key.active()) return T(1);
    const int rel = static_cast<int>(e - begin) * H + h + offset;
    return keep.factor<T>(rel >> 2, rel & 3, scale);
  }
};

// A window of a source's transposed entries [begin, end), whose edges are scattered, and their
// pairs with heads [h0, h1] that a segment draws: entry u takes per_entry consecutive blocks from
// (e_u*H + h0) >> 2 as slots u * per_entry + k.
struct ScatteredEdges {
  long long begin, end;
  int H, h0, per_entry;
  __device__ __forceinline__ ScatteredEdges(SegmentKeep& keep, const int32_t* __restrict__ edge_id,
                                            long long begin, long long row_end, int H, int h0, int h1)
      : begin(begin), H(H), h0(h0) {
    if (!keep.key.active()) {
      end = row_end, per_entry = 1;
      return;
    }
    per_entry = (H % 4 == 0 ? (h1 >> 2) - (h0 >> 2) : (h1 - h0 + 3) / 4) + 1;
    end = min(row_end, begin + keep.max_slots() / per_entry);
    // Slot s is entry u = s / per_entry, block k = s % per_entry; a lane's slots step by width,
    // so u and k step by width / n and width % n (two divisions a window, not two a slot).
    const int n = per_entry, step_u = keep.width / n, step_k = keep.width % n;
    int u = keep.lane / n, k = keep.lane % n;
    keep.draw(static_cast<int>(end - begin) * n, [&](int) {
      const long long block = ((static_cast<long long>(edge_id[begin + u]) * H + h0) >> 2) + k;
      u += step_u, k += step_k;
      if (k >= n) k -= n, ++u;
      return block;
    });
  }
  // The factor of pair (e, h), e being the edge of entry `entry` (begin + u): its block is
  // ((e H + h0) & 3) + h - h0 >> 2 after the entry's first, in 32 bits.
  template <class T>
  __device__ __forceinline__ T factor(const SegmentKeep& keep, long long entry, long long e, int h,
                                      T scale) const {
    if (!keep.key.active()) return T(1);
    const int rel =
        static_cast<int>((static_cast<unsigned>(e) * static_cast<unsigned>(H) + static_cast<unsigned>(h0)) &
                         3u) +
        h - h0;
    const int slot = static_cast<int>(entry - begin) * per_entry + (rel >> 2);
    return keep.factor<T>(slot, rel & 3, scale);
  }
};

// Where a group's lane sits: work item, and the lane's VEC features [c, c + VEC) of head h. Of
// the whole grid, or of the blocks [first_block, first_block + blocks) (a grid that runs two
// kinds of items, GridSplit). G, the lanes a group, is a power of two of at most a warp: a launch
// argument of the kernels that sum nothing across a group's lanes (the forward's, the merges;
// computed once per thread, it costs nothing per edge, and one kernel then serves every G), a
// template one of the backward walk's (its per-edge butterflies, warps::group_sum<G>, unroll).
struct GroupLane {
  long long first_item;  // item of lane group 0 of this warp in this grid-stride round
  long long stride;      // items per grid-stride round
  int group;             // group index in the warp
  int lane;              // lane within the group
  // (Not the second constructor's formula at (0, gridDim.x): the kernels that take one kind of
  // item keep the code measured at 100M edges.)
  __device__ __forceinline__ explicit GroupLane(int G) {
    const long long warp = warps::warp_id();
    group = (threadIdx.x % kWarp) / G;
    lane = threadIdx.x % G;
    first_item = warp * (kWarp / G);
    stride = warps::warp_count() * (kWarp / G);
  }
  __device__ __forceinline__ GroupLane(int G, long long first_block, long long blocks) {
    const long long warp = ((blockIdx.x - first_block) * blockDim.x + threadIdx.x) / kWarp;
    group = (threadIdx.x % kWarp) / G;
    lane = threadIdx.x % G;
    first_item = warp * (kWarp / G);
    stride = blocks * blockDim.x / kWarp * (kWarp / G);
  }
};

// A grid whose first `first_blocks` blocks take the long rows' chunks and the others the uncut
// rows: two kinds of items in one launch where both grids fit the device at once
// (launch_together). On Cora the two kernels ran one after the other, each a few microseconds of
// a nearly idle device (the chunks' blocks come first: the merge after the launch waits for
// them). Where the grids fill the device, one launch each: at 100M edges one launch of both made
// the step 0.74 ms slower.
struct GridSplit {
  unsigned first_blocks = 0;  // the chunks' blocks
  __device__ bool in_first() const { return blockIdx.x < first_blocks; }
  __device__ __forceinline__ GroupLane lanes(int G) const {
    return in_first() ? GroupLane(G, 0, first_blocks) : GroupLane(G, first_blocks, gridDim.x - first_blocks);
  }
};

// Online-softmax state of one lane: running max, sum of exp, and the weighted feature sum. With
// kPositive (GAT's training forward, for d er: docs/kernels.md) also the same two sums over the
// edges whose LeakyReLU argument is positive, rescaled with them.
template <class T, int VEC, bool kPositive = false>
struct OnlineState {
  T m = -INFINITY;                      // running max of the scores
  T z = 0;                              // sum of exp(s - m) (without dropout)
  T acc[VEC] = {};                      // sum of exp(s - m) * keep/(1-p) * V
  T z_pos = 0;                          // kPositive: z over the positive edges
  T acc_pos[kPositive ? VEC : 1] = {};  // kPositive: acc over the positive edges

  __device__ __forceinline__ void add(T score, T drop, const Vec<T, VEC>& v, bool positive = false) {
    if (score > m) {
      const T r = exp(m - score);
      z *= r;
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] *= r;
      if constexpr (kPositive) {
        z_pos *= r;
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc_pos[k] *= r;
      }
      m = score;
    }
    const T p = exp(score - m);
    z += p;
    const T w = p * drop;
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] += w * v.v[k];
    if constexpr (kPositive) {  // selects, not branches: a group's heads differ in sign
      z_pos += positive ? p : T(0);
      const T w_pos = positive ? w : T(0);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc_pos[k] += w_pos * v.v[k];
    }
  }
};

// 1 / z, or 0 for an empty row (z = 0): what a row's sums are divided by.
template <class T>
__device__ __forceinline__ T inverse_of_sum(T z) {
  return z > T(0) ? T(1) / z : T(0);
}

// What the forward does to a row's out = acc / z before it stores it: adds the bias, then (with
// elu, OutputActivation) applies elu_dropout, the decision of out's flat element n being the
// output dropout's keep(n): bit n % 4 of Philox block n / 4, one draw for a vector of VEC <= 4
// values at a multiple of VEC, as elu_dropout's kernel draws it (keep_map.cuh).
template <class T>
struct OutputEpilogue {
  const T* bias = nullptr;  // (H, F) or null
  bool elu = false;
  detail::EluDropoutForward<T> activation{};
  DropoutKey key;  // the output dropout's; inactive: every value kept
  template <int VEC>
  __device__ __forceinline__ void apply(Vec<T, VEC>& o, int c, long long n) const {
    static_assert(4 % VEC == 0 || VEC % 4 == 0,
                  "a vector lies in one Philox block of 4, or fills whole blocks");
    if (bias) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) o.v[k] += bias[c + k];
    }
    if (!elu) return;
    unsigned kept = 0xFFu;
    if (key.active()) {
      if constexpr (VEC <= 4) {
        kept = key.keep4(static_cast<uint64_t>(n >> 2)) >> (n & 3);
      } else {  // n is a multiple of VEC: VEC / 4 whole blocks
        kept = 0;
#pragma unroll
        for (int b = 0; b < VEC / 4; ++b) kept |= key.keep4(static_cast<uint64_t>(n >> 2) + b) << (4 * b);
      }
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = activation(o.v[k], (kept >> k) & 1u);
  }
};

// x[i, h, c..c+VEC) = acc * inv of a (N, H, F) tensor x, through `epilogue` when given (c the
// column in the row's H F); with `low` (bf16 only) also what rounding to bf16 lost there
// (OutputLow).
template <class S, int VEC>
__device__ __forceinline__ void store_scaled(S* __restrict__ x, long long i, int H, int F, int h, int c,
                                             const Compute<S> (&acc)[VEC], Compute<S> inv,
                                             const OutputEpilogue<Compute<S>>* epilogue = nullptr,
                                             const OutputLow<S>& low = {}) {
  using T = Compute<S>;
  Vec<T, VEC> o;
#pragma unroll
  for (int k = 0; k < VEC; ++k) o.v[k] = acc[k] * inv;
  const long long n = (i * H + h) * F + (c - h * F);
  if (epilogue) epilogue->template apply<VEC>(o, c, n);
  store_row<S, VEC>(x + n, o);
  if constexpr (kHasOutputLow<S>)
    if (low.out_low) store_row<S, VEC>(low.out_low + n, rounding_error<S, VEC>(o));
}

// Writes out[i, h, c..c+VEC) = acc / z through the epilogue (bias, activation) and (from the
// head's first lane) lse[i,h] = m + log z; zeros (then the epilogue) and -inf for an empty row
// (z = 0). With low.out_low (bf16) also out's rounding error.
template <class S, int VEC>
__device__ __forceinline__ void write_row(S* __restrict__ out,           // (N, H, F)
                                          Compute<S>* __restrict__ lse,  // (N, H)
                                          long long i, int H, int F, int h, int c, Compute<S> m, Compute<S> z,
                                          const Compute<S> (&acc)[VEC],
                                          const OutputEpilogue<Compute<S>>& epilogue = {},
                                          const OutputLow<S>& low = {}) {
  using T = Compute<S>;
  store_scaled<S, VEC>(out, i, H, F, h, c, acc, inverse_of_sum(z), &epilogue, low);
  if (c % F == 0) lse[i * H + h] = z > T(0) ? m + log(z) : -INFINITY;
}

// Where GAT's training forward writes the sums over the positive edges (OnlineState's kPositive)
// and, for rows cut into chunks, their chunk partials; all null when they are not asked. S is
// pos_out's dtype, the rest Compute<S>. For bf16 rows pos_out holds the difference that d er
// takes, pos_out - pos_weight out = (acc_pos - (z_pos / z) acc) / z, formed in f32 before it is
// rounded (RowDer), and out_low (OutputLow, its base) out's rounding error: what the backward
// needs of out beside the bf16 output, whose rounding would otherwise reach d er whole.
template <class S, class T = Compute<S>>
struct PositiveParts : OutputLow<S> {
  S* out = nullptr;       // (N, H, F) pos_out = acc_pos / z (bf16: less pos_weight out)
  T* weight = nullptr;    // (N, H)    pos_weight = z_pos / z
  T* part_z = nullptr;    // (W, H)    z_pos of each chunk
  T* part_acc = nullptr;  // (W, H, F) acc_pos of each chunk
};

// Writes pos_out[i, h, c..c+VEC) = acc_pos / z (bf16: less pos_weight acc / z, PositiveParts)
// and (from the head's first lane) pos_weight[i,h] = z_pos / z; zeros for an empty row.
template <class S, int VEC>
__device__ __forceinline__ void write_positive_row(const PositiveParts<S>& pos, long long i, int H, int F,
                                                   int h, int c, Compute<S> z, Compute<S> z_pos,
                                                   const Compute<S> (&acc_pos)[VEC],
                                                   const Compute<S> (&acc)[VEC]) {
  using T = Compute<S>;
  const T inv = inverse_of_sum(z);
  if constexpr (kHasOutputLow<S>) {
    T difference[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) difference[k] = acc_pos[k] - z_pos * inv * acc[k];
    store_scaled<S, VEC>(pos.out, i, H, F, h, c, difference, inv);
  } else {
    store_scaled<S, VEC>(pos.out, i, H, F, h, c, acc_pos, inv);
  }
  if (c % F == 0) pos.weight[i * H + h] = z_pos * inv;
}

// Row and edge range [begin, end) of chunk w: the chunks of row i are [chunk_ptr[i],
// chunk_ptr[i+1]), and chunk_row[w] is the row that owns chunk w (Graph::row_chunk_row).
struct ChunkRange {
  long long row, begin, end;
};
__device__ __forceinline__ ChunkRange find_chunk(const int32_t* __restrict__ row_ptr,    // (N+1,)
                                                 const int32_t* __restrict__ chunk_ptr,  // (N+1,)
                                                 const int32_t* __restrict__ chunk_row,  // (W,)
                                                 long long w, int chunk) {
  const long long row = chunk_row[w];
  const long long begin = row_ptr[row] + (w - chunk_ptr[row]) * chunk;
  return {row, begin, min(begin + chunk, static_cast<long long>(row_ptr[row + 1]))};
}

// The long rows' chunks (Graph::row_chunk_ptr, row_chunk_row or the transpose's) as
// value_grad_merge_kernel takes them: an item per (chunk, column tile), of which a row's first
// chunk merges the row's chunks in chunk order and the others return. At 100M edges (H200, ncu)
// the first layer's backward merge took 0.24 ms with an item per row, most rows without a chunk,
// and 0.11 ms so. The forward's merge measured slower so (0.38 -> 0.54 ms, the output layer's
// 0.17 -> 0.29 ms) and keeps an item per row.
struct ChunkRows {
  const int32_t* ptr;  // (N+1,) row i's chunks are [ptr[i], ptr[i+1])
  const int32_t* row;  // (chunks,) the row of each chunk
  long long chunks;
  // The row whose first chunk is w, or -1.
  __device__ __forceinline__ long long first_of(long long w) const {
    const long long i = row[w];
    return ptr[i] == w ? i : -1;
  }
};

// The chunks of the graph's long rows, or with `transposed` of its transpose's long rows.
inline ChunkRows chunk_rows(const Graph& graph, bool transposed) {
  if (transposed)
    return {graph.t_row_chunk_ptr().data<int32_t>(), graph.t_row_chunk_row().data<int32_t>(),
            graph.num_t_row_chunks()};
  return {graph.row_chunk_ptr().data<int32_t>(), graph.row_chunk_row().data<int32_t>(),
          graph.num_row_chunks()};
}

// One group of G lanes per (long row, column tile): merges the row's chunk partials in chunk
// order (and those of the positive sums when `pos` has them).
template <class S, int VEC>
__global__ void __launch_bounds__(kThreads)
    aggregate_merge_kernel(const int32_t* __restrict__ chunk_ptr,    // (N+1,)
                           const Compute<S>* __restrict__ part_m,    // (W, H)
                           const Compute<S>* __restrict__ part_z,    // (W, H)
                           const Compute<S>* __restrict__ part_acc,  // (W, H, F)
                           S* __restrict__ out,                      // (N, H, F)
                           Compute<S>* __restrict__ lse,             // (N, H)
                           long long N, int H, int F, int tiles, int G, PositiveParts<S> pos = {},
                           OutputEpilogue<Compute<S>> epilogue = {}) {
  using T = Compute<S>;
  const GroupLane g(G);
  const int HF = H * F;
  const long long items = N * tiles;
  const bool positive = pos.out != nullptr;
  for (long long item = g.first_item + g.group; item < items; item += g.stride) {
    const long long i = item / tiles;
    const int c = ((static_cast<int>(item - i * tiles)) * G + g.lane) * VEC;
    const long long w0 = chunk_ptr[i], w1 = chunk_ptr[i + 1];
    if (c >= HF || w0 == w1) continue;
    const int h = c / F;
    T m = -INFINITY;
    for (long long w = w0; w < w1; ++w) m = fmax(m, part_m[w * H + h]);
    T z = 0, acc[VEC] = {}, z_pos = 0, acc_pos[VEC] = {};
    for (long long w = w0; w < w1; ++w) {
      const T r = exp(part_m[w * H + h] - m);
      z += part_z[w * H + h] * r;
      const Vec<T, VEC> a = load_vec<T, VEC>(part_acc + w * HF + c);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] += a.v[k] * r;
      if (!positive) continue;
      z_pos += pos.part_z[w * H + h] * r;
      const Vec<T, VEC> a_pos = load_vec<T, VEC>(pos.part_acc + w * HF + c);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc_pos[k] += a_pos.v[k] * r;
    }
    write_row<S, VEC>(out, lse, i, H, F, h, c, m, z, acc, epilogue, pos);
    if (positive) write_positive_row<S, VEC>(pos, i, H, F, h, c, z, z_pos, acc_pos, acc);
  }
}

// One group of G lanes per (long transposed row, column tile): dV = sum of its chunk partials in
// order, and (when given) sum[j,h] = sum of part_sum over the chunks, by the lane of the head's
// first feature.
template <class S, int VEC>
__global__ void __launch_bounds__(kThreads)
    value_grad_merge_kernel(ChunkRows rows,
                            const Compute<S>* __restrict__ part_acc,  // (W, H, F) or null
                            S* __restrict__ dV,                       // (N, H, F) or null
                            const Compute<S>* __restrict__ part_sum,  // (W, H) or null
                            Compute<S>* __restrict__ sum,             // (N, H) or null
                            int H, int F, int tiles, int G) {
  using T = Compute<S>;
  const GroupLane g(G);
  const int HF = H * F;
  const long long items = rows.chunks * tiles;
  for (long long item = g.first_item + g.group; item < items; item += g.stride) {
    const long long first = item / tiles;
    const int c = ((static_cast<int>(item - first * tiles)) * G + g.lane) * VEC;
    const long long j = rows.first_of(first);
    if (c >= HF || j < 0) continue;
    const long long w0 = first, w1 = rows.ptr[j + 1];
    if (dV) {
      T acc[VEC] = {};
      for (long long w = w0; w < w1; ++w) {
        const Vec<T, VEC> a = load_vec<T, VEC>(part_acc + w * HF + c);
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] += a.v[k];
      }
      store_row<S, VEC>(dV + j * HF + c, to_vec(acc));
    }
    if (sum && c % F == 0) {
      const int h = c / F;
      T total = 0;
      for (long long w = w0; w < w1; ++w) total += part_sum[w * H + h];
      sum[j * H + h] = total;
    }
  }
}

// GAT's d er from the forward's positive sums (docs/kernels.md): with D = G.out,
//   d er[i,h] = (1 - negative_slope) (G[i,h,:].pos_out[i,h,:] - D[i,h] pos_weight[i,h]).
// For bf16 rows pos_out holds pos_out - pos_weight out already (PositiveParts), so that
//   d er[i,h] = (1 - negative_slope) G[i,h,:].pos_out[i,h,:],
// the two nearly equal terms having been taken apart in f32 by the forward; pos_weight is unused.
template <class S, class T = Compute<S>>
struct RowDer {
  const S* pos_out;     // (N, H, F)
  const T* pos_weight;  // (N, H) (not read for bf16)
  T* der;               // (N, H): Compute<S>, as er (GatScores)
  T one_minus_slope;
};

// GAT's walk over the transposed graph reads er, lse and D of each edge's destination. Separate
// (N, H) arrays would cost three random accesses an edge (three sectors at the output layer's
// single head, three DRAM accesses at 8 heads); head_rows_dot_kernel packs them into one row of
// `stride` values per node instead: er at offset lead, lse at lead + H, D at lead + 2H, and with
// lead = H F the node's gradient row G[i] (H, F) before them.
// The rows are Compute<S>, as er is, and hold G[i] only where S is (lead is 0 for bf16). For bf16
// rows out_low (OutputLow, the base), when set, is added to out as it is read.
template <class S, class T = Compute<S>>
struct RowPack : OutputLow<S> {
  const T* er;   // (N, H)
  const T* lse;  // (N, H)
  T* rows;       // (N, stride), or null: D goes to its own (N, H)
  int stride;
  int lead = 0;  // 0, or H F: the row starts with G[i]
};

// The output activation's backward (OutputActivation) inside head_rows_dot_kernel: there `out`
// is the activation's output and G its gradient; the kernel turns G into the gradient of the
// activation's input (elu_dropout's backward, the decisions drawn again as the forward's
// epilogue drew them), writes it to grad_pre and goes on with it, and takes the ELU's input, out
// plus the bias, from out (detail::elu_input_of_output).
template <class S, class T = Compute<S>>
struct RowActivation {
  S* grad_pre = nullptr;  // (N, H, F); null: no activation
  detail::EluDropoutBackward<T> backward{};
  DropoutKey key;  // the output dropout's
  T inverse_keep_scale = 1, inverse_alpha = 1;
};

// D[i,h] = G[i,h,:].out[i,h,:], a thread per (node, head), into D or packed with er and lse
// (`pack`); and d er when `der` is given. The features are read VEC at a time (launched by
// head_rows_dot): one at a time, 8 of them a row, the loads waited for each other and the first
// layer's 40M rows took 1.57 ms at 100M edges. With
// out_bias (H, F), `out` holds out plus that bias (gat_attention_aggregate's fused bias) and the
// bias is taken off in double first. With `act`, G and out are first taken through the output
// activation's backward (RowActivation).
// The dots are summed in double: d er is a difference of two nearly equal terms where most of a
// row's weight sits on edges of positive argument, and a product of two floats is exact in
// double, so only the roundings of out and pos_out themselves reach it (the f32 sums lost up to
// 1.6e-5 of d er's largest value against the CPU's edge sums on a small graph). bf16 rounds far
// more: there out + out_low is read (`pack`, OutputLow) and pos_out holds the forward's f32
// difference (RowDer), so that no bf16 rounding of out or pos_out reaches D or d er.
// With bias_partial the kernel also sums G (after the activation's backward: the gradient of out
// plus the bias) over its rows, for d bias, which then needs no pass over the (N, H F) gradient
// of its own (0.3 ms at 100M edges): thread j adds its rows into its own column of bias_slots (its
// rows all have head j % H, blockDim.x and the grid's threads being multiples of H), then a group
// of lanes per column c < H F adds the slots of head c / F in a fixed order into the block's row
// of bias_partial, in double; head_rows_dot's ordered column sums add the blocks' rows. At most
// 64 registers: 4 blocks a multiprocessor (the slots' 72 took it to 3, and the first layer's D
// kernel at 100M edges from 1.84 to 2.30 ms).
template <class S, int VEC>
__global__ void __launch_bounds__(kThreads, 4)
    head_rows_dot_kernel(const S* __restrict__ G,     // (N, H, F)
                         const S* __restrict__ out,   // (N, H, F)
                         Compute<S>* __restrict__ D,  // (N, H), or null with pack
                         long long NH, int F, RowDer<S> der = {},
                         const Compute<S>* __restrict__ out_bias = nullptr,  // (H, F) or null
                         int H = 1, RowPack<S> pack = {}, RowActivation<S> act = {},
                         double* __restrict__ bias_partial = nullptr) {  // (gridDim.x, H F) or null
  using T = Compute<S>;
  static_assert(4 % VEC == 0, "a vector lies in one Philox block of 4");
  extern __shared__ double bias_slots[];  // (F, blockDim.x) with bias_partial
  if (bias_partial)
    for (int f = 0; f < F; ++f) bias_slots[f * blockDim.x + threadIdx.x] = 0;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < NH;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = t / H;
    const int h = static_cast<int>(t - i * H);
    const T* bias = out_bias ? out_bias + h * F : nullptr;  // (F,) of this head
    T* row = pack.rows ? pack.rows + i * pack.stride : nullptr;
    double acc = 0, acc_pos = 0;  // G.out and G.pos_out, from one read of G
#pragma unroll 4
    for (int f = 0; f < F; f += VEC) {
      const long long n = t * F + f;  // out's flat index
      Vec<T, VEC> grad = load_row<S, VEC>(G + n), value = load_row<S, VEC>(out + n);
      if constexpr (kHasOutputLow<S>) {
        if (pack.out_low) {
          const Vec<T, VEC> low = load_row<S, VEC>(pack.out_low + n);
#pragma unroll
          for (int k = 0; k < VEC; ++k) value.v[k] += low.v[k];
        }
      }
      if (act.grad_pre) {
        const unsigned kept =
            act.key.active() ? act.key.keep4(static_cast<uint64_t>(n >> 2)) >> (n & 3) : 0xFu;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          grad.v[k] = act.backward(value.v[k], grad.v[k], (kept >> k) & 1u);
          value.v[k] = detail::elu_input_of_output(value.v[k], act.inverse_keep_scale, act.inverse_alpha);
        }
        store_row<S, VEC>(act.grad_pre + n, grad);
      }
      if (pack.lead) store_vec<T, VEC>(row + h * F + f, grad);
      if (bias_partial)
#pragma unroll
        for (int k = 0; k < VEC; ++k)
          bias_slots[(f + k) * blockDim.x + threadIdx.x] += static_cast<double>(grad.v[k]);
      if constexpr (kHasOutputLow<S>) {
        // The dots take the gradient that the walk reads, grad_pre rounded to bf16: D is then
        // the row's sum of a da, as the walk's da - D needs (an f32 D beside a rounded da left
        // the rounding of grad_pre in their difference).
        if (act.grad_pre)
#pragma unroll
          for (int k = 0; k < VEC; ++k) grad.v[k] = widen(narrow<S>(grad.v[k]));
      }
      Vec<T, VEC> pos_value{};
      if (der.der) pos_value = load_row<S, VEC>(der.pos_out + n);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const double g = grad.v[k];
        acc += g * (static_cast<double>(value.v[k]) - (bias ? static_cast<double>(bias[f + k]) : 0.0));
        if (der.der) acc_pos += g * static_cast<double>(pos_value.v[k]);
      }
    }
    if (row) {
      row[pack.lead + h] = pack.er[t];
      row[pack.lead + H + h] = pack.lse[t];
      row[pack.lead + 2 * H + h] = static_cast<T>(acc);
    } else {
      D[t] = static_cast<T>(acc);
    }
    if (der.der) {
      if constexpr (kHasOutputLow<S>)  // pos_out already less pos_weight out (RowDer)
        der.der[t] = static_cast<T>(static_cast<double>(der.one_minus_slope) * acc_pos);
      else
        der.der[t] = static_cast<T>(static_cast<double>(der.one_minus_slope) *
                                    (acc_pos - acc * static_cast<double>(der.pos_weight[t])));
    }
  }
  if (bias_partial) {
    // Column c = (h, f) of the block's row of bias_partial adds the slots of head h's threads,
    // slots = blockDim.x / H of them, by a group of `lanes` lanes (the least power of two leaving
    // a lane at most 8 slots): each lane adds its slots in order (thread h + H (lane + lanes k)),
    // then a fixed butterfly adds the lanes. One thread adding a column's slots alone took 256
    // dependent adds at H = 1 (Cora's output layer: 13.0 us for the kernel, 5.8 us so); a warp
    // a column made the first layer's kernel (H = 8) 1.4 us slower than one thread did.
    __syncthreads();
    const int slots = static_cast<int>(blockDim.x) / H;
    int lanes = 1;
    while (slots > 8 * lanes && lanes < kWarp) lanes *= 2;
    const int lane = threadIdx.x % lanes, groups = blockDim.x / lanes;
    // Every thread takes the same rounds, so the shuffles see whole warps.
    for (int c0 = 0; c0 < H * F; c0 += groups) {
      const int c = c0 + static_cast<int>(threadIdx.x) / lanes;
      const int h = c / F, f = c - h * F;
      double sum = 0;
      if (c < H * F)
        for (int j = h + H * lane; j < static_cast<int>(blockDim.x); j += H * lanes)
          sum += bias_slots[f * blockDim.x + j];
      for (int offset = lanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      if (c < H * F && lane == 0) bias_partial[blockIdx.x * static_cast<long long>(H) * F + c] = sum;
    }
  }
}

// ---- host side -------------------------------------------------------------------------

// Calls f(Int<G>{}) for G in {1, 2, 4, 8, 16, 32}.
template <class Fn>
void with_group(int G, Fn&& f) {
  switch (G) {
    case 1:
      return f(Int<1>{});
    case 2:
      return f(Int<2>{});
    case 4:
      return f(Int<4>{});
    case 8:
      return f(Int<8>{});
    case 16:
      return f(Int<16>{});
    default:
      return f(Int<32>{});
  }
}

// Calls f(Int<VEC>{}): 16-byte vectors (float4 / double2) when every row of `F` features splits
// into whole vectors and all the pointers are 16-byte aligned, scalars otherwise. bf16 takes the
// widest of 8 (16 bytes), 4 and 2 values that F and the pointers allow, at most kMaxVec: a head
// of 4 or 12 features still loads 8 bytes at a time, and only an odd F reads value by value.
template <class T, int kMaxVec = 16 / sizeof(T), class Fn>
void with_vec(int F, std::initializer_list<const void*> ptrs, Fn&& f) {
  if constexpr (std::is_same_v<T, bf16>) {
    if constexpr (kMaxVec >= 8)
      if (F % 8 == 0 && detail::all_aligned(16, ptrs)) return f(Int<8>{});
    if (F % 4 == 0 && detail::all_aligned(8, ptrs)) return f(Int<4>{});
    if (F % 2 == 0 && detail::all_aligned(4, ptrs)) return f(Int<2>{});
    return f(Int<1>{});
  } else {
    constexpr int kVec = std::min<int>(kMaxVec, 16 / sizeof(T));
    if (F % kVec == 0 && detail::all_aligned(16, ptrs))
      f(Int<kVec>{});
    else
      f(Int<1>{});
  }
}

// The gather kernels' vectors (the forward's rows, the backward walk's sources): a lane holds a
// whole head of 8 floats (32 bytes) where F is 8 and the pointers allow, so that a warp walks 4
// rows of 8 heads instead of 2: the per-edge work that every lane of a head repeats (the score,
// its exponential, the dropout decision, the walk's use of the edge) costs half the warp
// instructions an edge, and no shuffle joins a head's two halves. Else with_vec's. It pays only
//  - with at least kWideLaneMinHeads heads, whose lanes share a row's index reads: with one head
//    of 8 features each lane read its own (100M edges, the output layer: forward 2.97 -> 3.10 ms,
//    walk 3.64 -> 4.80 ms reading 30% more bytes);
//  - when `rows` x H such lanes fill the device's resident threads: a lane's batches hold half
//    the edges (kUnrollOf), so where the device has room to spare each lane's chain of loads
//    waits longer (Cora's step 0.118 -> 0.121 ms).
// bf16 rows take 8 values (16 bytes), pairs or single values, not with_vec's 4: each lane width
// is a set of kernels of its own (every group size, with and without each option), and heads of
// 4 or 12 bf16 features are in no benchmark (the paper's layers take 8 and the classes 7 or 6).
constexpr int kWideLaneMinHeads = 4;
template <class T, class Fn>
void with_gather_vec(long long rows, int H, int F, std::initializer_list<const void*> ptrs, Fn&& f) {
  if constexpr (sizeof(T) == 4) {
    if (F == 8 && H >= kWideLaneMinHeads && rows * H >= cuda::resident_threads() &&
        detail::all_aligned(32, ptrs))
      return f(Int<8>{});
  }
  if constexpr (std::is_same_v<T, bf16>) {
    if (F % 8 == 0 && detail::all_aligned(16, ptrs)) return f(Int<8>{});
    if (F % 2 == 0 && detail::all_aligned(4, ptrs)) return f(Int<2>{});
    return f(Int<1>{});
  } else {
    with_vec<T>(F, ptrs, f);
  }
}

// d bias inside head_rows_dot_kernel: for heads of at most kBiasInRowsF features (a block's
// slots are kThreads x F doubles of shared memory) and H dividing kThreads.
constexpr int kBiasInRowsF = 16;
inline bool bias_in_rows(int H, int F) { return H > 0 && kThreads % H == 0 && F <= kBiasInRowsF; }

// head_rows_dot_kernel over the NH (node, head) rows of F features, 16-byte vectors when F and
// the pointers allow. With bias_partials (bias_in_rows(H, F)) also the column sums of G after the
// activation's backward, d bias: at most one wave of blocks (each then takes many rows, and a
// last wave's partial fill would leave multiprocessors idle for a block's whole time), whose rows
// of partial sums, (blocks, H F) f64, are left in *bias_partials (bias_from_partials adds them in
// block order).
// (A vector of at most 4 values: the output dropout's decisions of a vector lie in one Philox
// block.)
template <class S>
void head_rows_dot(const S* G, const S* out, Compute<S>* D, long long NH, int F, RowDer<S> der = {},
                   const Compute<S>* out_bias = nullptr, int H = 1, RowPack<S> pack = {},
                   RowActivation<S> act = {}, Tensor* bias_partials = nullptr) {
  const bool with_bias = bias_partials != nullptr;
  if (with_bias) GAT_CHECK(bias_in_rows(H, F), "head_rows_dot: d bias of ", H, " heads of ", F, " features");
  const void* out_low = nullptr;
  if constexpr (kHasOutputLow<S>) out_low = pack.out_low;
  with_vec<S, 4>(F, {G, out, out_low, der.pos_out, out_bias, pack.rows, act.grad_pre}, [&](auto vec) {
    const auto kernel = head_rows_dot_kernel<S, decltype(vec)::value>;
    long long blocks = warps::warp_blocks((NH + kWarp - 1) / kWarp);
    const size_t slot_bytes = with_bias ? sizeof(double) * kThreads * F : 0;
    Tensor partial;  // (blocks, H F) f64 with bias_partials
    if (with_bias) {
      static int per_multiprocessor[kBiasInRowsF + 1] = {};  // resident blocks, by F (0: not asked yet)
      if (per_multiprocessor[F] == 0)
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor[F], kernel, kThreads,
                                                                 slot_bytes));
      blocks = std::min<long long>(blocks, std::max(1, per_multiprocessor[F]) * cuda::multiprocessors());
      partial = Tensor::empty({blocks, int64_t{H} * F}, DType::f64, Device::cuda, "bias partials");
    }
    kernel<<<static_cast<unsigned>(blocks), kThreads, slot_bytes, cuda::stream()>>>(
        G, out, D, NH, F, der, out_bias, H, pack, act, with_bias ? partial.data<double>() : nullptr);
    CUDA_CHECK_LAUNCH("head_rows_dot_kernel");
    if (with_bias) *bias_partials = partial;
  });
}

inline int pow2_at_least(long long n) {
  int g = 1;
  while (g < n && g < kWarp) g *= 2;
  return g;
}

// Column tiling of the (H * F) features of a row: G lanes of VEC features per tile.
struct Tiling {
  int G, tiles;
  Tiling(int HF, int vec) {
    G = pow2_at_least((HF + vec - 1) / vec);
    tiles = HF == 0 ? 0 : (HF + G * vec - 1) / (G * vec);
  }
};

// Blocks for one group of G lanes per item: a grid-stride grid of at most kResidentWaves times
// what the device keeps resident. Rows differ in length, and a block holds its multiprocessor's
// slots until its longest row is done: one block per 16 rows (312,500 blocks at 5M rows) left the
// forward kernel at 30% achieved occupancy of a theoretical 50%. Measured on the H200 (100M-edge
// training step): no cap 109.6 ms, 1 wave 101.8, 2 waves 101.3, 4 waves 101.0, 8 waves 101.8;
// Cora's step unchanged (0.297 ms).
constexpr long long kResidentWaves = 4;
inline unsigned group_blocks(long long items, int G) {
  const unsigned blocks = warps::warp_blocks((items + kWarp / G - 1) / (kWarp / G), kThreads);
  return static_cast<unsigned>(
      std::min<long long>(blocks, std::max(1LL, kResidentWaves * cuda::resident_threads() / kThreads)));
}

// What a launch of a kernel that takes rows and chunks (GridSplit) runs: the uncut rows, the
// long rows' chunks, or both (each its own instantiation: the kernels of one kind are the code
// they were before the two were launched together).
enum class Items { rows, chunks, both };

// Calls f(std::integral_constant<Items, ...>{}): Items::both when `together`, else Items::chunks.
template <class Fn>
void with_items(bool together, Fn&& f) {
  if (together)
    f(std::integral_constant<Items, Items::both>{});
  else
    f(std::integral_constant<Items, Items::chunks>{});
}

// Whether grids of `a` and `b` blocks run at once on the device: then as one launch (GridSplit).
inline bool launch_together(unsigned a, unsigned b) {
  return static_cast<long long>(a) + b <= cuda::resident_threads() / kThreads;
}

// Calls f(S{}) with S the storage type of the attention kernels' rows: float, double or bf16
// (computed in f32); other dtypes throw naming `op`.
template <class Fn>
decltype(auto) dispatch_rows(DType dtype, const char* op, Fn&& f) {
  if (dtype == DType::bf16) return f(bf16{});
  return dispatch_float(dtype, op, f);
}

template <class T>
T drop_scale(const DropoutKey& key) {
  return key.active() ? T(1) / (T(1) - static_cast<T>(key.p)) : T(1);
}

}  // namespace gat::ops::cuda_impl::attention
