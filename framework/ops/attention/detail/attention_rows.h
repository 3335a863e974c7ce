// The CPU row machinery of the fused attention ops (csr_softmax_aggregate, gat_attention_aggregate,
// gatv2_attention_aggregate; included by their .cpp files only): rows of a CSR spread over the
// OpenMP threads with per-thread scratch, the attention dropout's keep factors, a row's softmax
// terms and its backward, and the forward aggregate of any score policy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gat/framework/graph.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops::attention_rows {

inline void check_dropout(const char* op, const DropoutKey& key) {
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, op, ": attention dropout rate ", key.p, " is outside [0, 1)");
}

// Keep factors of the attention dropout, keep / (1 - p) or 1 when inactive, of the (edge, head)
// indices e H + h [0, E H): drawn for the whole graph at once, read row by row (a row's edges
// e in [b, end) own the indices [b H, end H)).
template <class T>
class DropFactors {
 public:
  DropFactors(const DropoutKey& k, int64_t num_indices)
      : active_(k.active()), scale_(active_ ? T(1) / (T(1) - static_cast<T>(k.p)) : T(1)) {
    GAT_CHECK(!k.stream_base, "csr_softmax_aggregate: a key recorded for a CUDA graph reached the CPU");
    if (active_) mask_ = KeepMask(k, num_indices);
  }
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
  KeepMask mask_;
};

// Per-thread scratch for one row of degree edges: (edge, head) keep factors, computed scores and
// exponentials, and per head the scores' max and the sum of the exponentials.
template <class T>
struct RowScratch {
  std::vector<T> drop, s, ex, m, z;
  void reserve(int64_t degree, int64_t H) {
    if (static_cast<int64_t>(ex.size()) < degree * H) {
      drop.resize(static_cast<size_t>(degree * H));
      s.resize(static_cast<size_t>(degree * H));
      ex.resize(static_cast<size_t>(degree * H));
    }
    m.resize(static_cast<size_t>(H));
    z.resize(static_cast<size_t>(H));
  }
};

// ex (degree, H) = exp(s_row - shift[h]) for a row's scores s_row (degree, H), contiguous: the
// subtractions, then one flat pass of exponentials, which vectorises for any H.
template <class T>
GAT_SIMD_CLONES void shifted_exps(const T* s_row, int64_t degree, int64_t H, const T* shift, T* ex) {
  for (int64_t k = 0; k < degree; ++k)
    for (int64_t h = 0; h < H; ++h) ex[k * H + h] = s_row[k * H + h] - shift[h];
  for (int64_t q = 0; q < degree * H; ++q) ex[q] = detail::vec_exp(ex[q]);
}

// A row's softmax over its edges, every head at once: m[h] = max over k of s_row[k, h],
// ex[k, h] = exp(s_row[k, h] - m[h]) and z[h] = their sum, in edge order. Weights are ex / z, not
// exp(s - lse): lse = m + log z rounds to ulp(m), a relative error of 1e-3 in f32 for scores of
// 1e4.
template <class T>
void row_softmax_terms(const T* s_row, int64_t degree, int64_t H, RowScratch<T>& row) {
  std::fill(row.m.begin(), row.m.end(), -std::numeric_limits<T>::infinity());
  std::fill(row.z.begin(), row.z.end(), T(0));
  for (int64_t k = 0; k < degree; ++k)
    for (int64_t h = 0; h < H; ++h) row.m[h] = std::max(row.m[h], s_row[k * H + h]);
  shifted_exps(s_row, degree, H, row.m.data(), row.ex.data());
  for (int64_t k = 0; k < degree; ++k)
    for (int64_t h = 0; h < H; ++h) row.z[h] += row.ex[k * H + h];
}

// Head h of a row's softmax backward, with a = row.ex (the weights, (degree, H)) and d = row.drop:
// kept[k, h] = a[k] d[k] when kept is given and, when ds is given,
//   da[k] = (g . values[src[k], h, :]) d[k],  ds[k, h] = a[k] (da[k] - sum over k' of a[k'] da[k'])
// for g (F,) the gradient of the head's output row. values (Ns, H, F); src (degree,), kept and ds
// (degree, H) start at the row's first edge.
template <class T>
void softmax_row_backward(const RowScratch<T>& row, int64_t degree, int64_t H, int64_t h, int64_t F,
                          const T* g, const T* values, const int32_t* src, T* ds, T* kept) {
  for (int64_t k = 0; kept && k < degree; ++k) kept[k * H + h] = row.ex[k * H + h] * row.drop[k * H + h];
  if (!ds) return;
  T row_sum = 0;
  for (int64_t k = 0; k < degree; ++k) {
    const T* vj = values + (static_cast<int64_t>(src[k]) * H + h) * F;
    T dot = 0;
    for (int64_t f = 0; f < F; ++f) dot += g[f] * vj[f];
    const T da = dot * row.drop[k * H + h];
    ds[k * H + h] = da;
    row_sum += row.ex[k * H + h] * da;
  }
  for (int64_t k = 0; k < degree; ++k) ds[k * H + h] = row.ex[k * H + h] * (ds[k * H + h] - row_sum);
}

// log of a head's softmax denominator, m + log z; -inf for an empty row.
template <class T>
T log_sum_exp(T m, T z) {
  return z > T(0) ? m + std::log(z) : m;
}

// f(row, i, b, degree) for the rows i in [begin, end) of a CSR (edges [b, b + degree)), with f
// inlined into every SIMD version.
template <class T, class F>
GAT_SIMD_CLONES void rows_in_range(const int32_t* row_ptr, int64_t begin, int64_t end, int64_t H,
                                   RowScratch<T>& row, F& f) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b = row_ptr[i], degree = row_ptr[i + 1] - b;
    row.reserve(degree, H);
    f(row, i, b, degree);
  }
}

// Rows per task of for_each_row: task t holds rows [t kRowsPerTask, (t + 1) kRowsPerTask).
constexpr int64_t kRowsPerTask = 64;

// f(row, i, b, degree) for every row i of a CSR, rows spread dynamically over the OpenMP threads
// in tasks of kRowsPerTask rows (a task's rows in order on one thread), each thread with its own
// RowScratch reserved for the row.
template <class T, class F>
void for_each_row(const int32_t* row_ptr, int64_t N, int64_t H, F&& f) {
#pragma omp parallel
  {
    RowScratch<T> row;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < (N + kRowsPerTask - 1) / kRowsPerTask; ++task)
      rows_in_range(row_ptr, task * kRowsPerTask, std::min(N, (task + 1) * kRowsPerTask), H, row, f);
  }
}

// f(row, i, b, degree) for every row i of the graph's CSR (edges [b, b + degree)), H heads, with
// the row's softmax terms (row.m, row.ex, row.z: row_softmax_terms of the scores' row) and its
// dropout keep factors (row.drop) in the row's scratch: the forward's view of a row.
template <class T, class Scores, class F>
void for_each_softmax_row(const Graph& graph, const Scores& scores, const DropoutKey& attn_dropout, int64_t H,
                          F&& f) {
  const DropFactors<T> drop(attn_dropout, graph.num_edges() * H);
  for_each_row<T>(graph.row_ptr().data<int32_t>(), graph.num_dst_nodes(), H,
                  [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
                    drop.fill(b * H, degree * H, row.drop.data());  // (degree, H)
                    row_softmax_terms(scores.row(row, i, b, degree), degree, H, row);
                    f(row, i, b, degree);
                  });
}

// The forward of the fused ops, for any score policy: out (N, H, F) and lse (N, H) from the scores' rows and
// V (N, H, F).
template <class T, class Scores>
void aggregate_forward(const Graph& graph, const Scores& scores, const Tensor& node_value,
                       const DropoutKey& attn_dropout, Tensor& out, Tensor& lse) {
  const int64_t H = lse.size(1), F = node_value.size(2);
  const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
  const T* V = node_value.data<T>();                      // (Ns, H, F)
  T* o = out.data<T>();                                   // (N, H, F)
  T* l = lse.data<T>();                                   // (N, H)
  for_each_softmax_row<T>(graph, scores, attn_dropout, H,
                          [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
                            T* oi = o + i * H * F;
                            std::fill(oi, oi + H * F, T(0));
                            for (int64_t h = 0; h < H; ++h) {
                              l[i * H + h] = log_sum_exp(row.m[h], row.z[h]);
                              for (int64_t k = 0; k < degree; ++k) {
                                const T w = row.ex[k * H + h] / row.z[h] * row.drop[k * H + h];
                                const T* vj = V + (static_cast<int64_t>(src[b + k]) * H + h) * F;
                                for (int64_t f = 0; f < F; ++f) oi[h * F + f] += w * vj[f];
                              }
                            }
                          });
}

}  // namespace gat::ops::attention_rows
