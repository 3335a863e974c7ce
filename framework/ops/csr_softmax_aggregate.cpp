#include "gat/framework/ops/csr_softmax_aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention_rows.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/loops.h"
#include "gat/framework/ops/vec_math.h"
#include "gat/framework/rng_cpu.h"

namespace gat::ops {

namespace {

// Checks the graph/scores pair shared by both ops; returns H.
int64_t check_scores(const char* op, const Graph& graph, const Tensor& edge_scores) {
  check_float(op, "edge_scores", edge_scores);
  check_dim(op, "edge_scores", edge_scores, 2);
  GAT_CHECK(edge_scores.size(0) == graph.num_edges(), op, ": 'edge_scores' ",
            edge_scores.describe(), " must have one row per edge of the graph (",
            graph.num_edges(), " edges)");
  GAT_CHECK(graph.device() == edge_scores.device(), op, ": the graph is on ",
            device_name(graph.device()), " but 'edge_scores' is ", edge_scores.describe());
  return edge_scores.size(1);
}

using namespace attention_rows;

// Where a row's scores come from: row(scratch, i, b, degree) gives the scores (degree, H) of row
// i's edges [b, b + degree), contiguous in edge order.
// csr_softmax_aggregate's scores are stored (E, H) and read in place.
template <class T>
struct StoredScores {
  const T* s;  // (E, H)
  int64_t H;
  const T* row(RowScratch<T>&, int64_t, int64_t b, int64_t) const { return s + b * H; }
};

// GAT's scores LeakyReLU(el[src(e)] + er[i] (+ term[e])), computed into the row's scratch.
template <class T>
struct GatScores {
  const int32_t* src;  // (E,)
  const T* el;         // (Ns, H)
  const T* er;         // (Nd, H)
  const T* term;       // (E, H) or null
  int64_t H;
  // LeakyReLU as x times its factor, read from a table: the signs are random, a branch would be
  // mispredicted half the time.
  T factor[2];
  GatScores(const Graph& graph, const Tensor& l, const Tensor& r, const Tensor& t, double negative_slope)
      : src(graph.edge_src().data<int32_t>()), el(l.data<T>()), er(r.data<T>()),
        term(t.defined() ? t.data<T>() : nullptr), H(l.size(1)),
        factor{static_cast<T>(negative_slope), T(1)} {}
  // The LeakyReLU's argument of edge e = (j -> i), head h (in gat_edge_scores' order of sums).
  T argument(int64_t e, int64_t j, int64_t i, int64_t h) const {
    const T x = el[j * H + h] + er[i * H + h];
    return term ? x + term[e * H + h] : x;
  }
  // LeakyReLU'(argument)
  T slope(int64_t e, int64_t j, int64_t i, int64_t h) const { return factor[argument(e, j, i, h) > T(0)]; }
  const T* row(RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) const {
    T* s = row.s.data();  // (degree, H)
    for (int64_t k = 0; k < degree; ++k)
      for (int64_t h = 0; h < H; ++h) {
        const T x = argument(b + k, src[b + k], i, h);
        s[k * H + h] = x * factor[x > T(0)];
      }
    return s;
  }
};

// The backward of both ops.
// Pass 1 over CSR rows: a = exp(s - lse); for d scores da = G[i].V[j] * keep, the row sum r of
// a * da, ds = a (da - r), then row_end(i, b, degree) (GAT: ds into g in place, d er); for d
// values the dropped-out weights a * keep, kept for pass 2.
// Pass 2 over the transposed graph, in its fixed (source, destination) order: dV and, when
// edge_sum is given, edge_sum[j,h] = sum of ds[e,h] over j's out-edges (GAT: d el from g).
template <class T, class Scores, class RowEnd>
void aggregate_backward(const Graph& graph, const Scores& scores, const Tensor& node_value,
                        const Tensor& lse, const Tensor& grad_out, const DropoutKey& attn_dropout,
                        T* ds,        // (E, H) or null
                        T* dV,        // (Ns, H, F) or null
                        T* edge_sum,  // (Ns, H) or null; needs ds
                        RowEnd&& row_end) {
  const int64_t N = graph.num_dst_nodes(), H = lse.size(1), F = node_value.size(2);
  const T* V = node_value.data<T>();  // (Ns, H, F)
  const T* l = lse.data<T>();         // (N, H)
  const T* G = grad_out.data<T>();    // (N, H, F)
  const DropFactors<T> drop(attn_dropout, graph.num_edges() * H);
  const int32_t* row_ptr = graph.row_ptr().data<int32_t>();  // (N+1,)
  const int32_t* src = graph.edge_src().data<int32_t>();     // (E,)
  std::vector<T> kept_weights(dV ? static_cast<size_t>(graph.num_edges() * H) : 0);
  T* wk = dV ? kept_weights.data() : nullptr;  // (E, H)
  for_each_row<T>(row_ptr, N, H, [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
    drop.fill(b * H, degree * H, row.drop.data());                                 // (degree, H)
    shifted_exps(scores.row(row, i, b, degree), degree, H, l + i * H, row.ex.data());  // a (degree, H)
    for (int64_t h = 0; h < H; ++h) {
      const T* gi = G + (i * H + h) * F;
      T row_sum = 0;
      for (int64_t k = 0; k < degree; ++k) {
        const int64_t e = b + k;
        const T a = row.ex[k * H + h];
        if (wk) wk[e * H + h] = a * row.drop[k * H + h];
        if (!ds) continue;
        const T* vj = V + (static_cast<int64_t>(src[e]) * H + h) * F;
        T dot = 0;
        for (int64_t f = 0; f < F; ++f) dot += gi[f] * vj[f];
        const T da = dot * row.drop[k * H + h];
        ds[e * H + h] = da;
        row_sum += a * da;
      }
      if (!ds) continue;
      for (int64_t k = 0; k < degree; ++k)
        ds[(b + k) * H + h] = row.ex[k * H + h] * (ds[(b + k) * H + h] - row_sum);
    }
    if (ds) row_end(i, b, degree);
  });
  if (!dV && !edge_sum) return;
  const int32_t* t_row_ptr = graph.t_row_ptr().data<int32_t>();  // (Ns+1,)
  const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();     // (E,)
  const int32_t* t_edge_id = graph.t_edge_id().data<int32_t>();  // (E,) edge id
  for_each_row<T>(t_row_ptr, graph.num_src_nodes(), H, [&](RowScratch<T>&, int64_t j, int64_t b, int64_t degree) {
    T* dvj = dV ? dV + j * H * F : nullptr;
    T* sj = edge_sum ? edge_sum + j * H : nullptr;
    if (dvj) std::fill(dvj, dvj + H * F, T(0));
    if (sj) std::fill(sj, sj + H, T(0));
    for (int64_t k = b; k < b + degree; ++k) {
      const int64_t e = t_edge_id[k], i = t_dst[k];
      const T* gi = G + i * H * F;
      for (int64_t h = 0; h < H; ++h) {
        if (sj) sj[h] += ds[e * H + h];
        if (!dvj) continue;
        const T w = wk[e * H + h];
        for (int64_t f = 0; f < F; ++f) dvj[h * F + f] += w * gi[h * F + f];
      }
    }
  });
}

// pos_out (N, H, F) and pos_weight (N, H) of the contract, from their definitions: a pass over the
// rows with the forward's weights ex / z, summed over the edges whose LeakyReLU argument is
// positive. (The CPU backward does not read them: its d er sums g over the row's edges.)
template <class T>
void positive_sums(const Graph& graph, const GatScores<T>& scores, const Tensor& node_value,
                   const DropoutKey& attn_dropout, Tensor& pos_out, Tensor& pos_weight) {
  const int64_t N = graph.num_dst_nodes(), H = scores.H, F = node_value.size(2);
  T* o = pos_out.data<T>();     // (N, H, F)
  T* w = pos_weight.data<T>();  // (N, H)
  if (F == 0) {
    std::fill(w, w + N * H, T(0));
    return;
  }
  const T* V = node_value.data<T>();  // (Ns, H, F)
  for_each_softmax_row<T>(graph, scores, attn_dropout, H,
                          [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
    T* oi = o + i * H * F;
    std::fill(oi, oi + H * F, T(0));
    for (int64_t h = 0; h < H; ++h) {
      T weight = 0;
      for (int64_t k = 0; k < degree; ++k) {
        const int64_t e = b + k, j = scores.src[e];
        if (!(scores.argument(e, j, i, h) > T(0))) continue;
        const T a = row.ex[k * H + h] / row.z[h];
        weight += a;
        const T kept = a * row.drop[k * H + h];
        const T* vj = V + (j * H + h) * F;
        for (int64_t f = 0; f < F; ++f) oi[h * F + f] += kept * vj[f];
      }
      w[i * H + h] = weight;
    }
  });
}

}  // namespace

namespace cpu_impl {

void csr_softmax_aggregate_forward(const Graph& graph, const Tensor& edge_scores,
                                   const Tensor& node_value, const DropoutKey& attn_dropout,
                                   Tensor& out, Tensor& lse) {
  dispatch_float(edge_scores.dtype(), "csr_softmax_aggregate", [&](auto zero) {
    using T = decltype(zero);
    const StoredScores<T> scores{edge_scores.data<T>(), edge_scores.size(1)};
    aggregate_forward<T>(graph, scores, node_value, attn_dropout, out, lse);
  });
}

void csr_softmax_aggregate_backward(const Graph& graph, const Tensor& edge_scores,
                                    const Tensor& node_value, const Tensor& lse,
                                    const Tensor& grad_out, const DropoutKey& attn_dropout,
                                    Tensor* grad_scores, Tensor* grad_value) {
  dispatch_float(edge_scores.dtype(), "csr_softmax_aggregate backward", [&](auto zero) {
    using T = decltype(zero);
    const StoredScores<T> scores{edge_scores.data<T>(), edge_scores.size(1)};
    aggregate_backward<T>(graph, scores, node_value, lse, grad_out, attn_dropout,
                          grad_scores ? grad_scores->data<T>() : nullptr,
                          grad_value ? grad_value->data<T>() : nullptr, nullptr,
                          [](int64_t, int64_t, int64_t) {});
  });
}

void gat_attention_aggregate_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                                     const Tensor& edge_term, const Tensor& node_value,
                                     double negative_slope, const DropoutKey& attn_dropout,
                                     Tensor& out, Tensor& lse, Tensor* pos_out, Tensor* pos_weight) {
  dispatch_float(el.dtype(), "gat_attention_aggregate", [&](auto zero) {
    using T = decltype(zero);
    const GatScores<T> scores(graph, el, er, edge_term, negative_slope);
    aggregate_forward<T>(graph, scores, node_value, attn_dropout, out, lse);
    if (pos_out) positive_sums<T>(graph, scores, node_value, attn_dropout, *pos_out, *pos_weight);
  });
}

// d scores go to an (E, H) buffer, turned row by row into g = ds * LeakyReLU'(.) whose row sums
// are d er; pass 2 sums g over the out-edges into d el. g is d edge_term: the buffer is
// grad_edge_term when asked, else transient. The sums run in the orders of gat_edge_scores'
// backward, so the results are those of the unfused ops bit for bit.
void gat_attention_aggregate_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                                      const Tensor& edge_term, const Tensor& node_value,
                                      double negative_slope, const DropoutKey& attn_dropout,
                                      const Tensor&, const Tensor& lse, const Tensor&, const Tensor&,
                                      const Tensor& grad_out, Tensor* grad_el, Tensor* grad_er,
                                      Tensor* grad_edge_term, Tensor* grad_value) {
  dispatch_float(el.dtype(), "gat_attention_aggregate backward", [&](auto zero) {
    using T = decltype(zero);
    const GatScores<T> scores(graph, el, er, edge_term, negative_slope);
    const int64_t H = scores.H;
    const bool transient_g = !grad_edge_term && (grad_el || grad_er);
    std::vector<T> g_buffer(transient_g ? static_cast<size_t>(graph.num_edges() * H) : 0);
    T* g = grad_edge_term ? grad_edge_term->data<T>() : transient_g ? g_buffer.data() : nullptr;  // (E, H)
    T* der = grad_er ? grad_er->data<T>() : nullptr;  // (N, H)
    const int32_t* src = scores.src;
    aggregate_backward<T>(graph, scores, node_value, lse, grad_out, attn_dropout, g,
                          grad_value ? grad_value->data<T>() : nullptr,
                          grad_el ? grad_el->data<T>() : nullptr,
                          [&](int64_t i, int64_t b, int64_t degree) {
                            for (int64_t h = 0; h < H; ++h) {
                              T acc = 0;
                              for (int64_t e = b; e < b + degree; ++e) {
                                g[e * H + h] *= scores.slope(e, src[e], i, h);
                                acc += g[e * H + h];
                              }
                              if (der) der[i * H + h] = acc;
                            }
                          });
  });
}

void csr_softmax(const Graph& graph, const Tensor& edge_scores, Tensor& weights) {
  const int64_t N = graph.num_dst_nodes(), H = edge_scores.size(1);
  dispatch_float(edge_scores.dtype(), "csr_softmax", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* row_ptr = graph.row_ptr().data<int32_t>();  // (N+1,)
    const T* s = edge_scores.data<T>();                        // (E, H)
    T* a = weights.data<T>();                                  // (E, H)
    for_each_row<T>(row_ptr, N, H, [&](RowScratch<T>& row, int64_t, int64_t b, int64_t degree) {
      row_softmax_terms(s + b * H, degree, H, row);
      for (int64_t q = 0; q < degree * H; ++q) a[b * H + q] = row.ex[q] / row.z[q % H];
    });
  });
}

}  // namespace cpu_impl

namespace kernels {

void csr_softmax_aggregate_forward(const Graph& graph, const Tensor& edge_scores,
                                   const Tensor& node_value, const DropoutKey& attn_dropout,
                                   Tensor& out, Tensor& lse) {
  if (node_value.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::csr_softmax_aggregate_forward(graph, edge_scores, node_value,
                                                                  attn_dropout, out, lse));
  cpu_impl::csr_softmax_aggregate_forward(graph, edge_scores, node_value, attn_dropout, out, lse);
}

void csr_softmax_aggregate_backward(const Graph& graph, const Tensor& edge_scores,
                                    const Tensor& node_value, const Tensor& lse,
                                    const Tensor& grad_out, const DropoutKey& attn_dropout,
                                    Tensor* grad_scores, Tensor* grad_value) {
  if (node_value.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::csr_softmax_aggregate_backward(
        graph, edge_scores, node_value, lse, grad_out, attn_dropout, grad_scores, grad_value));
  cpu_impl::csr_softmax_aggregate_backward(graph, edge_scores, node_value, lse, grad_out,
                                           attn_dropout, grad_scores, grad_value);
}

void gat_attention_aggregate_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                                     const Tensor& edge_term, const Tensor& node_value,
                                     double negative_slope, const DropoutKey& attn_dropout,
                                     Tensor& out, Tensor& lse, Tensor* pos_out, Tensor* pos_weight) {
  if (pos_out || pos_weight) {
    const char* op = "gat_attention_aggregate (positive sums)";
    GAT_CHECK(pos_out && pos_weight, op, ": pos_out and pos_weight are asked for together");
    check_shape(op, "pos_out", *pos_out, out.shape());
    check_same(op, "pos_out", *pos_out, "out", out);
    check_shape(op, "pos_weight", *pos_weight, lse.shape());
    check_same(op, "pos_weight", *pos_weight, "lse", lse);
  }
  if (node_value.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::gat_attention_aggregate_forward(
        graph, el, er, edge_term, node_value, negative_slope, attn_dropout, out, lse, pos_out,
        pos_weight));
  cpu_impl::gat_attention_aggregate_forward(graph, el, er, edge_term, node_value, negative_slope,
                                            attn_dropout, out, lse, pos_out, pos_weight);
}

void gat_attention_aggregate_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                                      const Tensor& edge_term, const Tensor& node_value,
                                      double negative_slope, const DropoutKey& attn_dropout,
                                      const Tensor& out, const Tensor& lse, const Tensor& pos_out,
                                      const Tensor& pos_weight, const Tensor& grad_out,
                                      Tensor* grad_el, Tensor* grad_er, Tensor* grad_edge_term,
                                      Tensor* grad_value) {
  if (graph.num_edges() == 0 || el.size(1) == 0 || node_value.size(2) == 0) {
    // Nothing is aggregated: every gradient is zero (and the kernels may assume edges, heads and
    // features).
    for (Tensor* grad : {grad_el, grad_er, grad_edge_term, grad_value})
      if (grad) grad->zero_();
    return;
  }
  if (node_value.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::gat_attention_aggregate_backward(
        graph, el, er, edge_term, node_value, negative_slope, attn_dropout, out, lse, pos_out,
        pos_weight, grad_out, grad_el, grad_er, grad_edge_term, grad_value));
  cpu_impl::gat_attention_aggregate_backward(graph, el, er, edge_term, node_value, negative_slope,
                                             attn_dropout, out, lse, pos_out, pos_weight, grad_out,
                                             grad_el, grad_er, grad_edge_term, grad_value);
}

void csr_softmax(const Graph& graph, const Tensor& edge_scores, Tensor& weights) {
  if (edge_scores.is_cuda()) return GAT_CUDA_CALL(cuda_impl::csr_softmax(graph, edge_scores, weights));
  cpu_impl::csr_softmax(graph, edge_scores, weights);
}

}  // namespace kernels

Tensor csr_softmax_aggregate(const Graph& graph, const Tensor& edge_scores, const Tensor& node_value,
                             const DropoutKey& attn_dropout) {
  const char* op = "csr_softmax_aggregate";
  const int64_t H = check_scores(op, graph, edge_scores);
  check_same(op, "edge_scores", edge_scores, "node_value", node_value);
  check_dim(op, "node_value", node_value, 3);
  GAT_CHECK(node_value.size(0) == graph.num_src_nodes() && node_value.size(1) == H, op,
            ": 'node_value' ", node_value.describe(), " must be (Ns, H, F) with Ns = ",
            graph.num_src_nodes(), " sources and H = ", H, " heads of 'edge_scores' ",
            edge_scores.describe());
  check_dropout(op, attn_dropout);

  const int64_t N = graph.num_dst_nodes(), F = node_value.size(2);
  Tensor out = Tensor::empty({N, H, F}, node_value.dtype(), node_value.device(), op);
  Tensor lse = Tensor::empty({N, H}, node_value.dtype(), node_value.device(), "csr_softmax_aggregate lse");
  kernels::csr_softmax_aggregate_forward(graph, edge_scores, node_value, attn_dropout, out, lse);

  const bool need_scores = edge_scores.requires_grad(), need_value = node_value.requires_grad();
  return autograd::record(
      op, out, {edge_scores, node_value},
      [graph, s = edge_scores.detach(), v = node_value.detach(), lse, attn_dropout, need_scores,
       need_value](const Tensor& grad_out) {
        check_same("csr_softmax_aggregate backward", "grad_out", grad_out, "node_value", v);
        check_shape("csr_softmax_aggregate backward", "grad_out", grad_out,
                    {graph.num_dst_nodes(), v.size(1), v.size(2)});
        Tensor ds, dv;
        if (need_scores) ds = Tensor::empty(s.shape(), s.dtype(), s.device(), "d edge_scores");
        if (need_value) dv = Tensor::empty(v.shape(), v.dtype(), v.device(), "d node_value");
        kernels::csr_softmax_aggregate_backward(graph, s, v, lse, grad_out, attn_dropout,
                                                need_scores ? &ds : nullptr,
                                                need_value ? &dv : nullptr);
        return std::vector<Tensor>{ds, dv};
      });
}

Tensor gat_attention_aggregate(const Graph& graph, const Tensor& el, const Tensor& er,
                               const Tensor& node_value, double negative_slope,
                               const DropoutKey& attn_dropout, const Tensor& edge_term) {
  const char* op = "gat_attention_aggregate";
  check_gat_score_terms(op, graph, el, er, edge_term);
  check_same(op, "el", el, "node_value", node_value);
  check_dim(op, "node_value", node_value, 3);
  const int64_t Nd = graph.num_dst_nodes(), H = el.size(1), F = node_value.size(2);
  GAT_CHECK(node_value.size(0) == graph.num_src_nodes() && node_value.size(1) == H, op,
            ": 'node_value' ", node_value.describe(), " must be (Ns, H, F) with Ns = ",
            graph.num_src_nodes(), " sources of the graph and H = ", H, " heads of 'el' ",
            el.describe());
  GAT_CHECK(std::isfinite(negative_slope), op, ": negative_slope ", negative_slope, " is not finite");
  check_dropout(op, attn_dropout);

  Tensor out = Tensor::empty({Nd, H, F}, node_value.dtype(), node_value.device(), op);
  Tensor lse = Tensor::empty({Nd, H}, node_value.dtype(), node_value.device(), "gat_attention_aggregate lse");
  // CUDA's d er comes from the positive sums (the header); the CPU backward, the reference the
  // CUDA tests compare against, sums d er over the edges, and evaluation needs no gradient.
  Tensor pos_out, pos_weight;
  const bool keep_positive = node_value.is_cuda() && autograd::needs_grad({er});
  if (keep_positive) {
    pos_out = Tensor::empty({Nd, H, F}, node_value.dtype(), node_value.device(), "gat_attention_aggregate pos_out");
    pos_weight = Tensor::empty({Nd, H}, node_value.dtype(), node_value.device(), "gat_attention_aggregate pos_weight");
  }
  kernels::gat_attention_aggregate_forward(graph, el, er, edge_term, node_value, negative_slope,
                                           attn_dropout, out, lse, keep_positive ? &pos_out : nullptr,
                                           keep_positive ? &pos_weight : nullptr);

  const bool need_el = el.requires_grad(), need_er = er.requires_grad(),
             need_term = edge_term.defined() && edge_term.requires_grad(),
             need_value = node_value.requires_grad();
  return autograd::record(
      op, out, {el, er, edge_term, node_value},
      [graph, l = el.detach(), r = er.detach(), t = edge_term.defined() ? edge_term.detach() : Tensor(),
       v = node_value.detach(), o = out.detach(), lse, pos_out, pos_weight, negative_slope,
       attn_dropout, need_el, need_er, need_term, need_value](const Tensor& grad_out) {
        check_same("gat_attention_aggregate backward", "grad_out", grad_out, "node_value", v);
        check_shape("gat_attention_aggregate backward", "grad_out", grad_out, o.shape());
        Tensor dl, dr, dt, dv;
        if (need_el) dl = Tensor::empty(l.shape(), l.dtype(), l.device(), "d el");
        if (need_er) dr = Tensor::empty(r.shape(), r.dtype(), r.device(), "d er");
        if (need_term) dt = Tensor::empty(t.shape(), t.dtype(), t.device(), "d edge_term");
        if (need_value) dv = Tensor::empty(v.shape(), v.dtype(), v.device(), "d node_value");
        kernels::gat_attention_aggregate_backward(
            graph, l, r, t, v, negative_slope, attn_dropout, o, lse, pos_out, pos_weight, grad_out,
            need_el ? &dl : nullptr, need_er ? &dr : nullptr, need_term ? &dt : nullptr,
            need_value ? &dv : nullptr);
        return std::vector<Tensor>{dl, dr, dt, dv};
      });
}

Tensor csr_softmax(const Graph& graph, const Tensor& edge_scores) {
  check_scores("csr_softmax", graph, edge_scores);
  Tensor weights = Tensor::empty(edge_scores.shape(), edge_scores.dtype(), edge_scores.device(),
                                 "csr_softmax");
  kernels::csr_softmax(graph, edge_scores, weights);
  return weights;
}

}  // namespace gat::ops
