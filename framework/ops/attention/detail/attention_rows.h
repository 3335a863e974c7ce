// The CPU row machinery of the fused attention ops (csr_softmax_aggregate, gat_attention_aggregate,
// gatv2_attention_aggregate; included by their .cpp files and csr_softmax_aggregate_rows.h only): rows of a
// CSR spread over the OpenMP threads with per-thread scratch, the attention dropout's keep factors, a row's
// softmax terms and its backward, and the forward aggregate of any score policy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops::attention_rows {

// A function that takes or returns a head group (below) is always inlined (GAT_GROUP_FN): into the
// GAT_SIMD_CLONES version that calls it, so that a vector never crosses a call between code of two
// instruction sets, whose ABIs for vectors differ. That is what -Wpsabi warns about; it is
// silenced for the .cpp files that include this header (templates are instantiated at their end).
#define GAT_GROUP_FN __attribute__((always_inline)) inline
// The same for a lambda that takes or returns a head group, after its parameter list.
#define GAT_GROUP_FN_LAMBDA __attribute__((always_inline))
#pragma GCC diagnostic ignored "-Wpsabi"

inline void check_dropout(const char* op, const DropoutKey& key) {
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, op, ": attention dropout rate ", key.p, " is outside [0, 1)");
}

// Keep factors of the attention dropout, keep / (1 - p) or 1 when inactive, of the (edge, head)
// indices e H + h [0, E H): drawn for the whole graph at once, read row by row (a row's edges
// e in [b, end) own the indices [b H, end H)). With `kept` (a GAT op's KeptDecisions::attention):
// the decisions found there when it holds num_indices of them (the forward's, read by its
// backward), else drawn into it (the forward's, left for its backward). Null: drawn here.
template <class T>
class DropFactors {
 public:
  DropFactors(const DropoutKey& k, int64_t num_indices, KeepMask* kept = nullptr)
      : active_(k.active()), scale_(active_ ? T(1) / (T(1) - static_cast<T>(k.p)) : T(1)) {
    GAT_CHECK(!k.stream_base, "csr_softmax_aggregate: a key recorded for a CUDA graph reached the CPU");
    if (!active_) return;
    KeepMask& mask = kept ? *kept : own_;
    if (mask.size() != num_indices) mask = KeepMask(k, num_indices);
    mask_ = mask.data();
  }
  DropFactors(const DropFactors&) = delete;  // mask_ may point into own_
  DropFactors& operator=(const DropFactors&) = delete;
  void fill(int64_t first, int64_t count, T* out) const {  // out (count,)
    if (!active_) {
      std::fill(out, out + count, T(1));
      return;
    }
    for (int64_t k = 0; k < count; ++k) out[k] = static_cast<T>(mask_[first + k]) * scale_;  // 0 or scale
  }

 private:
  bool active_;
  T scale_;
  KeepMask own_;                   // the decisions, drawn here when no `kept` is given
  const uint8_t* mask_ = nullptr;  // (num_indices,) 1 kept, 0 dropped
};

// A row's exponentials are taken kExpBlock at a time, whole vectors: a row has few (edge, head)
// values (40 in Cora's first layer, 5 in its second), and a loop whose length is known only at
// run time did its last ones one by one. The row's scratch arrays are padded to whole blocks; the
// padding holds stale values, whose exponentials are computed and never read.
constexpr int64_t kExpBlock = 16;
inline int64_t exp_blocks_length(int64_t n) { return (n + kExpBlock - 1) / kExpBlock * kExpBlock; }

// x[q] = exp(x[q]) for q in [0, n), x (exp_blocks_length(n),).
template <class T>
GAT_GROUP_FN void exps_in_blocks(T* x, int64_t n) {
  for (int64_t q = 0; q < n; q += kExpBlock)
    for (int64_t l = 0; l < kExpBlock; ++l) x[q + l] = detail::vec_exp(x[q + l]);
}

// Per-thread scratch for one row of degree edges: (edge, head) keep factors, computed scores and
// exponentials, and per head the scores' max and the sum of the exponentials.
template <class T>
struct RowScratch {
  std::vector<T> drop, s, ex, m, z;
  // Whether the loop runs on several threads: only then do the row loops prefetch (prefetch_rows;
  // on one thread every row is in its own core's cache, and the asking cost 3% of a Cora epoch).
  bool prefetch = false;
  void reserve(int64_t degree, int64_t H) {
    const int64_t padded = exp_blocks_length(degree * H);
    if (static_cast<int64_t>(ex.size()) < padded) {
      drop.resize(static_cast<size_t>(padded));
      s.resize(static_cast<size_t>(padded));
      ex.resize(static_cast<size_t>(padded));
    }
    m.resize(static_cast<size_t>(H));
    z.resize(static_cast<size_t>(H));
  }
};

// A row's heads are handled W at a time (a head group), as one value of type V: a GCC vector of
// W = 8 lanes when H is a multiple of 8 (the paper's first layer: a row's 8 heads in one vector),
// else T itself (W = 1). Every lane does the float operations one head did, in the same order, so
// the results do not depend on W. Left to itself the vectoriser turned the short head loops inside
// the edge loops into shuffles and scalar stores.
template <class T, int W>
struct HeadGroupOf {
  typedef T type __attribute__((vector_size(W * sizeof(T))));
};
template <class T>
struct HeadGroupOf<T, 1> {
  using type = T;
};
template <class T, class V>
constexpr int64_t kLanes = static_cast<int64_t>(sizeof(V) / sizeof(T));

// Names a head group type V for fn. with_head_group calls fn(GroupTag<V>{}, H) with the head
// group of `heads` heads of T, and H = heads: an std::integral_constant for one head (the paper's
// output layer), so that a row's loops over its edges and heads become flat loops over its edges,
// which vectorise; an int64_t otherwise.
template <class V>
struct GroupTag {
  using type = V;
};
template <class T, class Fn>
void with_head_group(int64_t heads, Fn&& fn) {
  if (heads % 8 == 0) return fn(GroupTag<typename HeadGroupOf<T, 8>::type>{}, heads);
  if (heads == 1) return fn(GroupTag<T>{}, std::integral_constant<int64_t, 1>{});
  fn(GroupTag<T>{}, heads);
}

// The W values at p (any alignment), and their store.
template <class V, class T>
GAT_GROUP_FN V load_group(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T, class V>
GAT_GROUP_FN void store_group(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
// x in every lane.
template <class V, class T>
GAT_GROUP_FN V splat(T x) {
  if constexpr (std::is_same_v<V, T>) {
    return x;
  } else {
    V v{};
    for (int64_t l = 0; l < kLanes<T, V>; ++l) v[l] = x;
    return v;
  }
}
// std::max(a, b) lane by lane: b where a < b, else a.
template <class V>
GAT_GROUP_FN V max_lanes(const V& a, const V& b) {
  return a < b ? b : a;
}

// out (W, F) = the sum over k of w[k H + l] rows[k][l, :] for the W heads l of a head group, the
// terms of each element added in k order from 0, with rows[k] = base + index[k] stride (the
// group's part of a gathered row); `extent` values can be read from base. For W = F = 8 (8 heads
// of 8 features) the 8 sums stay in vector registers across the edges. For a group of one head
// of at most 8 features (the paper's output layer: one head of C classes) the F sums are the
// first lanes of one vector, and a row is one vector load: its lanes past F hold the next values
// in memory, added into lanes that are never stored (rows too near the end of base are read
// feature by feature).
// Otherwise each element's sum is a loop over the edges. Each way adds the same terms in the same
// order: the same bits.
template <class V, class T, class IntF>
GAT_GROUP_FN void aggregate_heads(T* out, const T* w, int64_t H, int64_t degree, const T* base,
                                  const int32_t* index, int64_t stride, IntF F, int64_t extent) {
  constexpr int64_t W = kLanes<T, V>;
  using Lanes = typename HeadGroupOf<T, 8>::type;
  if (W == 1 && F <= 8) {
    Lanes acc = splat<Lanes>(T(0));
    for (int64_t k = 0; k < degree; ++k) {
      const int64_t at = static_cast<int64_t>(index[k]) * stride;
      Lanes x = splat<Lanes>(T(0));
      if (at + 8 <= extent)
        x = load_group<Lanes>(base + at);
      else
        for (int64_t f = 0; f < F; ++f) x[f] = base[at + f];
      acc += w[k * H] * x;
    }
    for (int64_t f = 0; f < F; ++f) out[f] = acc[f];
    return;
  }
  if constexpr (W == 8 && std::is_same_v<IntF, std::integral_constant<int64_t, 8>>) {
    V acc[8];
    for (int l = 0; l < 8; ++l) acc[l] = splat<V>(T(0));
    for (int64_t k = 0; k < degree; ++k) {
      const T* row = base + static_cast<int64_t>(index[k]) * stride;  // (8, 8)
      for (int l = 0; l < 8; ++l) acc[l] += w[k * H + l] * load_group<V>(row + l * 8);
    }
    for (int l = 0; l < 8; ++l) store_group(out + l * 8, acc[l]);
  } else {
    for (int64_t c = 0; c < W * F; ++c) {  // each sum in a register
      T sum = 0;
      for (int64_t k = 0; k < degree; ++k)
        sum += w[k * H + c / F] * base[static_cast<int64_t>(index[k]) * stride + c];
      out[c] = sum;
    }
  }
}

// g . x over a head's features, summed in feature order from 0; the products in one vector
// multiply when F is 8 at compile time.
template <class T, class IntF>
GAT_GROUP_FN T dot_head(const T* g, const T* x, IntF F) {
  T dot = 0;
  if constexpr (std::is_same_v<IntF, std::integral_constant<int64_t, 8>>) {
    using Head = typename HeadGroupOf<T, 8>::type;
    const Head p = load_group<Head>(g) * load_group<Head>(x);
    for (int f = 0; f < 8; ++f) dot += p[f];
  } else {
    for (int64_t f = 0; f < F; ++f) dot += g[f] * x[f];
  }
  return dot;
}

// dot[l] = g[l, :] . x[l, :] for the 8 heads l of a group, heads of 8 features (g and x (8, 8)),
// each summed in feature order from 0 as dot_head sums one head: the products, an 8 x 8 transpose
// (the shuffles of AVX's unpack, shuffle and permute2f128), then 8 additions of whole vectors.
template <class V, class T>
GAT_GROUP_FN V dot_heads8(const T* g, const T* x) {
  V p[8], t[8], u[8];
  for (int l = 0; l < 8; ++l)
    p[l] = load_group<V>(g + l * 8) * load_group<V>(x + l * 8);  // head l's products
  for (int q = 0; q < 8; q += 2) {                               // unpack lo and hi
    t[q] = __builtin_shufflevector(p[q], p[q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[q + 1] = __builtin_shufflevector(p[q], p[q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int q = 0; q < 8; q += 4) {  // u[q + c]: features c and c + 4 of heads q .. q + 3
    u[q] = __builtin_shufflevector(t[q], t[q + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[q + 1] = __builtin_shufflevector(t[q], t[q + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[q + 2] = __builtin_shufflevector(t[q + 1], t[q + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[q + 3] = __builtin_shufflevector(t[q + 1], t[q + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  V dot = splat<V>(T(0));
  for (int c = 0; c < 4; ++c)  // feature c of every head
    dot += __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
  for (int c = 0; c < 4; ++c)  // feature c + 4
    dot += __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  return dot;
}

// fn(F) with F an std::integral_constant when it is 8 (the paper's heads), an int64_t otherwise.
template <class Fn>
void with_head_width(int64_t F, Fn&& fn) {
  if (F == 8) return fn(std::integral_constant<int64_t, 8>{});
  fn(F);
}

// with_head_width for the row loops of a head group V of T: F = 8 is a constant only for a
// group of 8 heads (the paper's first layer), where it picks dot_heads8 and aggregate_heads' 8 x 8
// sums. A group of one head takes F at run time: a constant 8 there only made dot_head's products
// one vector multiply (the same bits), and each variant of a row loop is compiled for both offset
// types, float's three times (rows_in_range).
template <class V, class T, class Fn>
void with_group_width(int64_t F, Fn&& fn) {
  if constexpr (kLanes<T, V> == 8) return with_head_width(F, fn);
  fn(F);
}

// ex (degree, H) = exp(s_row - shift[h]) for a row's scores s_row (degree, H), contiguous: the
// subtractions by head group, then one flat pass of exponentials, which vectorises for any H.
template <class V, class T, class IntH>
void shifted_exps(const T* s_row, int64_t degree, IntH H, const T* shift, T* ex) {
  constexpr int64_t W = kLanes<T, V>;
  for (int64_t k = 0; k < degree; ++k)
    for (int64_t h = 0; h < H; h += W)
      store_group(ex + k * H + h, load_group<V>(s_row + k * H + h) - load_group<V>(shift + h));
  exps_in_blocks(ex, degree * H);
}

// A row's softmax over its edges, every head at once: m[h] = max over k of s_row[k, h],
// ex[k, h] = exp(s_row[k, h] - m[h]) and z[h] = their sum, in edge order. Weights are ex / z, not
// exp(s - lse): lse = m + log z rounds to ulp(m), a relative error of 1e-3 in f32 for scores of
// 1e4.
template <class V, class T, class IntH>
void row_softmax_terms(const T* s_row, int64_t degree, IntH H, RowScratch<T>& row) {
  constexpr int64_t W = kLanes<T, V>;
  T *m = row.m.data(), *z = row.z.data(), *ex = row.ex.data();  // (H,), (H,), (degree, H)
  for (int64_t h = 0; h < H; h += W) {
    V max = splat<V>(-std::numeric_limits<T>::infinity());
    for (int64_t k = 0; k < degree; ++k) max = max_lanes(max, load_group<V>(s_row + k * H + h));
    store_group(m + h, max);
  }
  shifted_exps<V>(s_row, degree, H, m, ex);
  for (int64_t h = 0; h < H; h += W) {
    V sum = splat<V>(T(0));
    for (int64_t k = 0; k < degree; ++k) sum += load_group<V>(ex + k * H + h);
    store_group(z + h, sum);
  }
}

// A row's softmax backward, every head at once, with a = row.ex (the weights, (degree, H)) and
// d = row.drop: kept[k, h] = a[k, h] d[k, h] when kept is given and, when ds is given,
//   da[k, h] = (g[h, :] . values[src[k], h, :]) d[k, h],
//   ds[k, h] = a[k, h] (da[k, h] - sum over k' of a[k', h] da[k', h])
// for g (H, F) the gradient of the row's output. values (Ns, H, F); src (degree,), kept and ds
// (degree, H) start at the row's first edge. Uses row.z for the row sums.
template <class V, class T, class IntH, class IntF>
void softmax_row_backward(RowScratch<T>& row, int64_t degree, IntH H, IntF F, const T* g, const T* values,
                          const int32_t* src, T* ds, T* kept) {
  constexpr int64_t W = kLanes<T, V>;
  const T* a = row.ex.data();    // (degree, H)
  const T* d = row.drop.data();  // (degree, H)
  for (int64_t q = 0; kept && q < degree * H; ++q) kept[q] = a[q] * d[q];
  if (!ds) return;
  T* row_sum = row.z.data();  // (H,)
  std::fill(row_sum, row_sum + H, T(0));
  for (int64_t k = 0; k < degree; ++k) {
    const T* vj = values + static_cast<int64_t>(src[k]) * H * F;  // (H, F)
    for (int64_t h = 0; h < H; h += W) {
      V dot;
      if constexpr (W == 1) {
        dot = dot_head(g + h * F, vj + h * F, F);
      } else if constexpr (W == 8 && std::is_same_v<IntF, std::integral_constant<int64_t, 8>>) {
        dot = dot_heads8<V>(g + h * F, vj + h * F);
      } else {
        for (int64_t l = 0; l < W; ++l) dot[l] = dot_head(g + (h + l) * F, vj + (h + l) * F, F);
      }
      const V da = dot * load_group<V>(d + k * H + h);
      store_group(ds + k * H + h, da);
      store_group(row_sum + h, load_group<V>(row_sum + h) + load_group<V>(a + k * H + h) * da);
    }
  }
  for (int64_t k = 0; k < degree; ++k)
    for (int64_t h = 0; h < H; h += W)
      store_group(ds + k * H + h, load_group<V>(a + k * H + h) *
                                      (load_group<V>(ds + k * H + h) - load_group<V>(row_sum + h)));
}

// detail::prefetch_row for the rows base + index[q] stride, q in [begin, end), their first
// `extent` values (index: node ids, or edge ids of the graph's Offset type): a row loop calls it for the next
// row's edges, whose rows lie at random places (Cora's transposed backward pass of layer 1 at two threads:
// 315 -> 249 us). Rows of under 32 bytes are not asked for: their arrays (the output layer's 7 values a node)
// are small enough to stay in both cores' caches, and asking cost more than it saved (10 us a pass there).
template <class T, class Index>
GAT_GROUP_FN void prefetch_rows(const T* base, const Index* index, int64_t begin, int64_t end, int64_t stride,
                                int64_t extent) {
  if (extent * static_cast<int64_t>(sizeof(T)) < 32) return;
  for (int64_t q = begin; q < end; ++q)
    detail::prefetch_row(base + static_cast<int64_t>(index[q]) * stride, extent);
}

// log of a head's softmax denominator, m + log z; -inf for an empty row.
template <class T>
T log_sum_exp(T m, T z) {
  return z > T(0) ? m + std::log(z) : m;
}

// f(row, i, b, degree) for the rows i in [begin, end) of a CSR (edges [b, b + degree)), with f
// and everything it calls inlined (flatten): left to the inliner, the row helpers and vec_exp
// stayed calls to baseline x86-64 code, a third slower a Cora epoch. For float (training) the
// loop is compiled for AVX-512 and AVX2 besides baseline x86-64 (GAT_SIMD_CLONES), everything
// inlined into each version; for double (the finite-difference checks' reference) for baseline
// x86-64 alone: the same bits (-ffp-contract=off), compiled once instead of three times.
template <class T, class Offset, class F>
GAT_GROUP_FN void rows_in_range(const Offset* row_ptr, int64_t begin, int64_t end, int64_t H,
                                RowScratch<T>& row, F& f) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b = row_ptr[i], degree = row_ptr[i + 1] - b;
    row.reserve(degree, H);
    f(row, i, b, degree);
  }
}
template <class T, class Offset, class F>
__attribute__((flatten)) GAT_SIMD_CLONES void simd_rows_in_range(const Offset* row_ptr, int64_t begin,
                                                                 int64_t end, int64_t H, RowScratch<T>& row,
                                                                 F& f) {
  rows_in_range(row_ptr, begin, end, H, row, f);
}
template <class T, class Offset, class F>
__attribute__((flatten)) void baseline_rows_in_range(const Offset* row_ptr, int64_t begin, int64_t end,
                                                     int64_t H, RowScratch<T>& row, F& f) {
  rows_in_range(row_ptr, begin, end, H, row, f);
}

// Rows per task of for_each_row: task t holds rows [t kRowsPerTask, (t + 1) kRowsPerTask).
constexpr int64_t kRowsPerTask = 64;

// f(row, i, b, degree) for every row i of a CSR, in one contiguous range of whole tasks of
// kRowsPerTask rows per OpenMP thread, of about equal cost (a row costs about two edges: its
// softmax terms and its lse), each thread with its own RowScratch reserved for the row. A task's
// rows run in order on one thread. Contiguous, a thread's rows are those it wrote in the pass
// before and reads in the pass after (an elementwise pass split by parallel_for takes about the
// same rows): they stay in its core's cache. Rows dealt out dynamically, task by task, went to
// either core, and each pass read half its rows from the other core's cache. Offset: the graph's
// (dispatch_offsets).
template <class T, class Offset, class F>
void for_each_row(const Offset* row_ptr, int64_t N, int64_t H, F&& f) {
#pragma omp parallel
  {
    RowScratch<T> row;
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    row.prefetch = threads > 1;
    const int64_t begin = detail::first_row_of_thread(row_ptr, N, 2, 1, t, threads, kRowsPerTask),
                  end = detail::first_row_of_thread(row_ptr, N, 2, 1, t + 1, threads, kRowsPerTask);
    if constexpr (std::is_same_v<T, float>)
      simd_rows_in_range(row_ptr, begin, end, H, row, f);
    else
      baseline_rows_in_range(row_ptr, begin, end, H, row, f);
  }
}

// f(row, i, b, degree) for every row i of the graph's CSR (edges [b, b + degree)), H heads, with
// the row's softmax terms (row.m, row.ex, row.z: row_softmax_terms of the scores' row) and its
// dropout keep factors (row.drop; the decisions of `kept` as DropFactors takes them, or null) in
// the row's scratch: the forward's view of a row. V is the head group (with_head_group), Offset the
// graph's offset type.
template <class V, class T, class Offset, class Scores, class IntH, class F>
void for_each_softmax_row(const Graph& graph, const Scores& scores, const DropoutKey& attn_dropout,
                          KeepMask* kept, IntH H, F&& f) {
  const DropFactors<T> drop(attn_dropout, graph.num_edges() * H, kept);
  for_each_row<T>(graph.row_ptr().data<Offset>(), graph.num_dst_nodes(), H,
                  [&, H](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
                    drop.fill(b * H, degree * H, row.drop.data());  // (degree, H)
                    row_softmax_terms<V>(scores.template row<V>(row, i, b, degree), degree, H, row);
                    f(row, i, b, degree);
                  });
}

// What GAT's forward does to each output row once it is summed, as the row is written (its passes
// over out took 5% of a Cora step): out_bias added, then ELU, then the output dropout's decisions,
// each element as elu_dropout_forward takes it (the same operations, so the same values).
template <class T>
struct RowEpilogue {
  const T* bias = nullptr;        // (H F) or null
  bool elu = false;               // ELU with alpha, then the decisions of keep
  T alpha = 0;                    //
  const uint8_t* keep = nullptr;  // (N H F) or null (no output dropout)
  T keep_scale = 1;               //
  // out_i (H F,), row i of out
  GAT_GROUP_FN void operator()(T* out_i, int64_t i, int64_t HF) const {
    if (bias)
      for (int64_t c = 0; c < HF; ++c) out_i[c] += bias[c];
    if (!elu) return;
    for (int64_t c = 0; c < HF; ++c) out_i[c] = detail::vec_elu(out_i[c], alpha);
    for (int64_t c = 0; keep && c < HF; ++c)
      out_i[c] = DropoutKey::apply_kept(out_i[c], keep[i * HF + c], keep_scale);
  }
};

// The forward of the fused ops, for any score policy: out (N, H, F) and lse (N, H) from the
// scores' rows and V (N, H, F), the attention dropout's decisions as for_each_softmax_row takes them. A row's
// weights w = ex / z * keep first (in place of ex), then out[i, h, :] = the sum of w[k, h] values[src[k], h,
// :] in edge order (aggregate_heads), then the epilogue (null: none) on out[i].
template <class T, class Offset, class Scores>
void aggregate_forward(const Graph& graph, const Scores& scores, const Tensor& node_value,
                       const DropoutKey& attn_dropout, KeepMask* kept, Tensor& out, Tensor& lse,
                       const RowEpilogue<T>* epilogue = nullptr) {
  const int32_t* src = graph.edge_src().data<int32_t>();   // (E,)
  const T* values = node_value.data<T>();                  // (Ns, H, F)
  const int64_t value_count = node_value.numel();          // Ns H F
  T* o = out.data<T>();                                    // (N, H, F)
  T* l = lse.data<T>();                                    // (N, H)
  const Offset* row_ptr = graph.row_ptr().data<Offset>();  // (N+1,)
  const int64_t N = graph.num_dst_nodes();
  with_head_group<T>(lse.size(1), [&](auto group, auto H) {
    using V = typename decltype(group)::type;
    constexpr int64_t W = kLanes<T, V>;
    with_group_width<V, T>(node_value.size(2), [&](auto F) {
      for_each_softmax_row<V, T, Offset>(
          graph, scores, attn_dropout, kept, H,
          [&, H, F](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
            if (row.prefetch && i + 1 < N)
              prefetch_rows(values, src, b + degree, row_ptr[i + 2], H * F, H * F);
            T* w = row.ex.data();  // (degree, H)
            for (int64_t h = 0; h < H; ++h) l[i * H + h] = log_sum_exp(row.m[h], row.z[h]);
            for (int64_t h = 0; h < H; h += W) {
              const V z = load_group<V>(row.z.data() + h);
              for (int64_t k = 0; k < degree; ++k)
                store_group(w + k * H + h,
                            load_group<V>(w + k * H + h) / z * load_group<V>(row.drop.data() + k * H + h));
            }
            for (int64_t h = 0; h < H; h += W)  // out[i, h .. h + W) from values[src[k], h .. h + W)
              aggregate_heads<V>(o + (i * H + h) * F, w + h, H, degree, values + h * F, src + b, H * F, F,
                                 value_count - h * F);
            if (epilogue) (*epilogue)(o + i * H * F, i, H * F);
          });
    });
  });
}

}  // namespace gat::ops::attention_rows
