#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/detail/attention_rows.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

using namespace attention_rows;

// GATv2's scores, s[e,h] = sum_f att[h,f] LeakyReLU(x[e,h,f]) with x = xl[j] + xr[i] (+ et[e]),
// computed where an edge is visited; the backward's recomputation calls the same code, so it
// sees the forward's bits.
template <class T>
struct Gatv2Scores {
  const int32_t* src;  // (E,)
  const T* xl;         // (Ns, H, F)
  const T* xr;         // (Nd, H, F)
  const T* att;        // (H, F)
  const T* et;         // (E, H, F) or null
  int64_t H, F;
  T slope;
  Gatv2Scores(const Graph& graph, const Tensor& l, const Tensor& r, const Tensor& a, double negative_slope,
              const Tensor& edge_term)
      : src(graph.edge_src().data<int32_t>()),
        xl(l.data<T>()),
        xr(r.data<T>()),
        att(a.data<T>()),
        et(edge_term.defined() ? edge_term.data<T>() : nullptr),
        H(l.size(1)),
        F(l.size(2)),
        slope(static_cast<T>(negative_slope)) {}

  T leaky(T x) const { return x > T(0) ? x : slope * x; }
  T leaky_slope(T x) const { return x > T(0) ? T(1) : slope; }
  // x[e,h,f] of edge e = (j -> i), head h.
  T input(int64_t j, int64_t i, int64_t e, int64_t h, int64_t f) const {
    const T x = xl[(j * H + h) * F + f] + xr[(i * H + h) * F + f];
    return et ? x + et[(e * H + h) * F + f] : x;
  }
  T score(int64_t j, int64_t i, int64_t e, int64_t h) const {
    T s = 0;
    for (int64_t f = 0; f < F; ++f) s += att[h * F + f] * leaky(input(j, i, e, h, f));
    return s;
  }
  // The scores (degree, H) of row i's edges [b, b + degree), into the row's scratch.
  template <class V>  // the head group: any (the scores are computed head by head)
  const T* row(RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) const {
    T* s = row.s.data();
    for (int64_t k = 0; k < degree; ++k)
      for (int64_t h = 0; h < H; ++h) s[k * H + h] = score(src[b + k], i, b + k, h);
    return s;
  }
};

// Pass 1 over the CSR rows, per row i: a = exp(s - lse), da = keep / (1 - p) G[i].xl[j], the row
// sum r = sum a da, ds = a (da - r) and a~ = a keep / (1 - p) (kept (E, H) for pass 2, when d xl
// is asked for); then per edge t[f] = ds att[h,f] LeakyReLU'(x[f]): d xr[i] = sum of t over the
// row, d edge_term[e] = t, and d att gets ds LeakyReLU(x[f]) in a partial per task of
// kRowsPerTask rows (each task's rows run in order on one thread), summed in task order at the end.
// Pass 2 over the transposed graph, per source j in its out-edges' fixed order:
// d xl[j] = sum of a~ G[i] + t.
template <class T, class Offset>
void gatv2_backward(const Graph& graph, const Gatv2Scores<T>& scores, const Tensor& lse,
                    const Tensor& grad_out, const DropoutKey& attn_dropout, T* dxl, T* dxr, T* datt, T* det) {
  const int64_t Nd = graph.num_dst_nodes(), Ns = graph.num_src_nodes(), E = graph.num_edges();
  const int64_t H = scores.H, F = scores.F;
  const T* l = lse.data<T>();                              // (Nd, H)
  const T* G = grad_out.data<T>();                         // (Nd, H, F)
  const Offset* row_ptr = graph.row_ptr().data<Offset>();  // (Nd+1,)
  const DropFactors<T> drop(attn_dropout, E * H);
  std::vector<T> ds_buffer(static_cast<size_t>(E * H));              // ds (E, H)
  std::vector<T> kept_buffer(dxl ? static_cast<size_t>(E * H) : 0);  // a~ (E, H)
  const int64_t tasks = (Nd + kRowsPerTask - 1) / kRowsPerTask;
  std::vector<T> att_partials(datt ? static_cast<size_t>(tasks * H * F) : 0);  // (tasks, H, F)
  T* ds = ds_buffer.data();
  T* kept = dxl ? kept_buffer.data() : nullptr;
  for_each_row<T>(row_ptr, Nd, H, [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
    drop.fill(b * H, degree * H, row.drop.data());  // (degree, H)
    shifted_exps<T>(scores.template row<T>(row, i, b, degree), degree, H, l + i * H, row.ex.data());  // a
    softmax_row_backward<T>(row, degree, H, F, G + i * H * F, scores.xl, scores.src + b, ds + b * H,
                            kept ? kept + b * H : nullptr);
    if (!dxr && !datt && !det) return;
    T* dxri = dxr ? dxr + i * H * F : nullptr;                                  // (H, F)
    T* part = datt ? att_partials.data() + i / kRowsPerTask * H * F : nullptr;  // (H, F)
    if (dxri) std::fill(dxri, dxri + H * F, T(0));
    for (int64_t k = 0; k < degree; ++k) {
      const int64_t e = b + k, j = scores.src[e];
      for (int64_t h = 0; h < H; ++h) {
        const T d = ds[e * H + h];
        for (int64_t f = 0; f < F; ++f) {
          const T x = scores.input(j, i, e, h, f);
          const T t = d * scores.att[h * F + f] * scores.leaky_slope(x);
          if (dxri) dxri[h * F + f] += t;
          if (det) det[(e * H + h) * F + f] = t;
          if (part) part[h * F + f] += d * scores.leaky(x);
        }
      }
    }
  });
  if (datt) {
    std::fill(datt, datt + H * F, T(0));
    for (int64_t task = 0; task < tasks; ++task)
      for (int64_t q = 0; q < H * F; ++q) datt[q] += att_partials[task * H * F + q];
  }
  if (!dxl) return;
  const Offset* t_row_ptr = graph.t_row_ptr().data<Offset>();  // (Ns+1,)
  const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();   // (E,)
  const Offset* t_edge_id = graph.t_edge_id().data<Offset>();  // (E,) edge id
  for_each_row<T>(t_row_ptr, Ns, H, [&](RowScratch<T>&, int64_t j, int64_t b, int64_t degree) {
    T* dxlj = dxl + j * H * F;  // (H, F)
    std::fill(dxlj, dxlj + H * F, T(0));
    for (int64_t k = b; k < b + degree; ++k) {
      const int64_t e = t_edge_id[k], i = t_dst[k];
      for (int64_t h = 0; h < H; ++h) {
        const T w = kept[e * H + h], d = ds[e * H + h];
        const T* gi = G + (i * H + h) * F;
        for (int64_t f = 0; f < F; ++f) {
          const T t = d * scores.att[h * F + f] * scores.leaky_slope(scores.input(j, i, e, h, f));
          dxlj[h * F + f] += w * gi[f] + t;
        }
      }
    }
  });
}

// The scores s (E, H) of every edge and, when `signs` is given, the signs of x: with
// q = h P + f, bit q % 32 of signs[e, q / 32] is set when x[e,h,f] > 0 (the header's layout,
// which CUDA writes too).
template <class T, class Offset>
void edge_scores_and_signs(const Graph& graph, const Gatv2Scores<T>& gatv2, T* s, int32_t* signs) {
  const int64_t H = gatv2.H, F = gatv2.F, P = gatv2_sign_head_bits(F), words = gatv2_sign_words(H, F);
  for_each_row<T>(graph.row_ptr().data<Offset>(), graph.num_dst_nodes(), H,
                  [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
                    const T* si = gatv2.template row<T>(row, i, b, degree);  // (degree, H)
                    std::copy(si, si + degree * H, s + b * H);
                    if (!signs) return;
                    for (int64_t e = b; e < b + degree; ++e) {
                      int32_t* edge = signs + e * words;  // (words,)
                      std::fill(edge, edge + words, 0);
                      for (int64_t h = 0; h < H; ++h)
                        for (int64_t f = 0; f < F; ++f)
                          if (gatv2.input(gatv2.src[e], i, e, h, f) > T(0)) {
                            const int64_t q = h * P + f;
                            edge[q / 32] =
                                static_cast<int32_t>(static_cast<uint32_t>(edge[q / 32]) | (1u << (q % 32)));
                          }
                    }
                  });
}

}  // namespace

void check_gatv2_inputs(const char* op, const Graph& graph, const Tensor& xl, const Tensor& xr,
                        const Tensor& att, double negative_slope, const Tensor& edge_term) {
  check_float(op, "xl", xl);
  check_dim(op, "xl", xl, 3);
  check_same(op, "xl", xl, "xr", xr);
  check_same(op, "xl", xl, "att", att);
  GAT_CHECK(graph.device() == xl.device(), op, ": the graph is on ", device_name(graph.device()),
            " but 'xl' is ", xl.describe());
  const int64_t H = xl.size(1), F = xl.size(2);
  GAT_CHECK(xl.size(0) == graph.num_src_nodes(), op, ": 'xl' ", xl.describe(),
            " must be (Ns, H, F) with Ns = ", graph.num_src_nodes(), " source nodes of the graph");
  GAT_CHECK(xr.shape() == Shape({graph.num_dst_nodes(), H, F}), op, ": 'xr' ", xr.describe(),
            " must be (Nd, H, F) with Nd = ", graph.num_dst_nodes(),
            " destination nodes of the graph and H, F of 'xl' ", xl.describe());
  GAT_CHECK(att.shape() == Shape({H, F}), op, ": 'att' ", att.describe(),
            " must be (H, F) with H, F of 'xl' ", xl.describe());
  if (edge_term.defined()) {
    check_same(op, "xl", xl, "edge_term", edge_term);
    GAT_CHECK(edge_term.shape() == Shape({graph.num_edges(), H, F}), op, ": 'edge_term' ",
              edge_term.describe(), " must be (E, H, F) with E = ", graph.num_edges(),
              " edges of the graph and H, F of 'xl' ", xl.describe());
  }
  GAT_CHECK(std::isfinite(negative_slope), op, ": negative_slope ", negative_slope, " is not finite");
}

namespace {

// The kernels' score inputs, in declaration order.
Gatv2ScoreInputs score_inputs(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                              double negative_slope, const Tensor& edge_term) {
  return {&graph, xl, xr, att, negative_slope, edge_term};
}

}  // namespace

namespace cpu_impl {

void gatv2_attention_aggregate_forward(const Gatv2AttentionForwardArgs& a) {
  dispatch_float_offsets(a.xl.dtype(), *a.graph, "gatv2_attention_aggregate", [&](auto zero, auto offset) {
    using T = decltype(zero);
    using Offset = decltype(offset);
    const Gatv2Scores<T> gatv2(*a.graph, a.xl, a.xr, a.att, a.negative_slope, a.edge_term);
    aggregate_forward<T, Offset>(*a.graph, gatv2, a.xl, a.attn_dropout, nullptr, *a.out, *a.lse);
    if (a.scores)
      edge_scores_and_signs<T, Offset>(*a.graph, gatv2, a.scores->data<T>(), a.signs->data<int32_t>());
  });
}

// Reads neither out nor the forward's scores and signs: it recomputes x per edge.
void gatv2_attention_aggregate_backward(const Gatv2AttentionBackwardArgs& a) {
  dispatch_float_offsets(
      a.xl.dtype(), *a.graph, "gatv2_attention_aggregate backward", [&](auto zero, auto offset) {
        using T = decltype(zero);
        using Offset = decltype(offset);
        auto data = [](Tensor* t) { return t ? t->data<T>() : nullptr; };
        gatv2_backward<T, Offset>(*a.graph,
                                  Gatv2Scores<T>(*a.graph, a.xl, a.xr, a.att, a.negative_slope, a.edge_term),
                                  a.lse, a.grad_out, a.attn_dropout, data(a.grad_xl), data(a.grad_xr),
                                  data(a.grad_att), data(a.grad_edge_term));
      });
}

void gatv2_edge_scores(const Gatv2EdgeScoresArgs& a) {
  dispatch_float_offsets(a.xl.dtype(), *a.graph, "gatv2_edge_scores", [&](auto zero, auto offset) {
    using T = decltype(zero);
    using Offset = decltype(offset);
    edge_scores_and_signs<T, Offset>(
        *a.graph, Gatv2Scores<T>(*a.graph, a.xl, a.xr, a.att, a.negative_slope, a.edge_term),
        a.scores->data<T>(), nullptr);
  });
}

}  // namespace cpu_impl

namespace kernels {

void gatv2_attention_aggregate_forward(const Gatv2AttentionForwardArgs& a) {
  if (a.scores || a.signs) {
    const char* op = "gatv2_attention_aggregate (saved scores)";
    GAT_CHECK(a.scores && a.signs, op, ": scores and signs are asked for together");
    const int64_t E = a.graph->num_edges(), H = a.xl.size(1), F = a.xl.size(2);
    check_shape(op, "scores", *a.scores, Shape({E, H}));
    check_same(op, "scores", *a.scores, "xl", a.xl);
    check_shape(op, "signs", *a.signs, Shape({E, gatv2_sign_words(H, F)}));
    GAT_CHECK(a.signs->dtype() == DType::i32 && a.signs->device() == a.xl.device(), op, ": 'signs' ",
              a.signs->describe(), " must be i32 on the device of 'xl' ", a.xl.describe());
  }
  GAT_RUN_KERNEL(gatv2_attention_aggregate_forward, a, a.xl);
}

void gatv2_attention_aggregate_backward(const Gatv2AttentionBackwardArgs& a) {
  GAT_CHECK(a.scores.defined() == a.signs.defined(), "gatv2_attention_aggregate backward",
            ": the forward's scores and signs are given together");
  if (a.graph->num_edges() == 0 || a.xl.size(1) * a.xl.size(2) == 0) {
    // Nothing is aggregated (or every tensor is empty): every gradient is zero, and the kernels
    // may assume edges, heads and features.
    for (Tensor* grad : {a.grad_xl, a.grad_xr, a.grad_att, a.grad_edge_term})
      if (grad) grad->zero_();
    return;
  }
  GAT_RUN_KERNEL(gatv2_attention_aggregate_backward, a, a.xl);
}

void gatv2_edge_scores(const Gatv2EdgeScoresArgs& a) { GAT_RUN_KERNEL(gatv2_edge_scores, a, a.xl); }

}  // namespace kernels

Tensor gatv2_attention_aggregate(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                                 double negative_slope, const DropoutKey& attn_dropout,
                                 const Tensor& edge_term) {
  const char* op = "gatv2_attention_aggregate";
  if (detail::bf16_in_f32(op, xl, xr, att, edge_term))
    return detail::rounded_to_bf16(gatv2_attention_aggregate(graph, detail::widened(xl), detail::widened(xr),
                                                             detail::widened(att), negative_slope,
                                                             attn_dropout, detail::widened(edge_term)));
  check_gatv2_inputs(op, graph, xl, xr, att, negative_slope, edge_term);
  check_dropout(op, attn_dropout);
  const int64_t Nd = graph.num_dst_nodes(), H = xl.size(1), F = xl.size(2);
  Tensor out = Tensor::empty({Nd, H, F}, xl.dtype(), xl.device(), op);
  Tensor lse = Tensor::empty({Nd, H}, xl.dtype(), xl.device(), "gatv2_attention_aggregate lse");
  const bool has_edge_term = edge_term.defined();
  std::vector<Tensor> inputs{xl, xr, att};
  if (has_edge_term) inputs.push_back(edge_term);
  // The CUDA backward reads the scores and signs (the header), and spends the scores: the tape
  // runs the closure once. The CPU's backward recomputes x, and evaluation needs no gradient.
  const bool keep_scores = xl.is_cuda() && autograd::needs_grad(inputs);
  Tensor scores, signs;
  if (keep_scores) {
    const int64_t E = graph.num_edges();
    scores = Tensor::empty({E, H}, xl.dtype(), xl.device(), "gatv2_attention_aggregate scores");
    signs = Tensor::empty({E, gatv2_sign_words(H, F)}, DType::i32, xl.device(),
                          "gatv2_attention_aggregate signs");
  }
  Gatv2AttentionForwardArgs forward{
      {score_inputs(graph, xl, xr, att, negative_slope, edge_term), attn_dropout}};
  forward.out = &out;
  forward.lse = &lse;
  forward.scores = keep_scores ? &scores : nullptr;
  forward.signs = keep_scores ? &signs : nullptr;
  kernels::gatv2_attention_aggregate_forward(forward);

  const bool need_xl = xl.requires_grad(), need_xr = xr.requires_grad(), need_att = att.requires_grad(),
             need_edge_term = has_edge_term && edge_term.requires_grad();
  return autograd::record(
      op, out, std::move(inputs),
      [graph, l = xl.detach(), r = xr.detach(), a = att.detach(),
       et = has_edge_term ? edge_term.detach() : Tensor(), o = out.detach(), lse, scores, signs,
       negative_slope, attn_dropout, need_xl, need_xr, need_att, need_edge_term](const Tensor& grad_out) {
        check_same("gatv2_attention_aggregate backward", "grad_out", grad_out, "xl", l);
        check_shape("gatv2_attention_aggregate backward", "grad_out", grad_out, o.shape());
        auto grad_of = [](bool need, const Tensor& t, const char* name) {
          return need ? Tensor::empty(t.shape(), t.dtype(), t.device(), name) : Tensor();
        };
        Tensor dl = grad_of(need_xl, l, "d xl"), dr = grad_of(need_xr, r, "d xr"),
               da = grad_of(need_att, a, "d att"), de = grad_of(need_edge_term, et, "d edge_term");
        Gatv2AttentionBackwardArgs backward{{score_inputs(graph, l, r, a, negative_slope, et), attn_dropout}};
        backward.out = o;
        backward.lse = lse;
        backward.scores = scores;
        backward.signs = signs;
        backward.grad_out = grad_out;
        backward.grad_xl = need_xl ? &dl : nullptr;
        backward.grad_xr = need_xr ? &dr : nullptr;
        backward.grad_att = need_att ? &da : nullptr;
        backward.grad_edge_term = need_edge_term ? &de : nullptr;
        kernels::gatv2_attention_aggregate_backward(backward);
        std::vector<Tensor> grads{dl, dr, da};
        if (et.defined()) grads.push_back(de);
        return grads;
      });
}

Tensor gatv2_edge_scores(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                         double negative_slope, const Tensor& edge_term) {
  check_gatv2_inputs("gatv2_edge_scores", graph, xl, xr, att, negative_slope, edge_term);
  Tensor scores =
      Tensor::empty({graph.num_edges(), xl.size(1)}, xl.dtype(), xl.device(), "gatv2_edge_scores");
  Gatv2EdgeScoresArgs edge_scores{score_inputs(graph, xl, xr, att, negative_slope, edge_term), &scores};
  kernels::gatv2_edge_scores(edge_scores);
  return scores;
}

}  // namespace gat::ops
