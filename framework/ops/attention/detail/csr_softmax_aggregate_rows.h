// The CPU kernels of csr_softmax_aggregate and of GAT's fused attention (csr_softmax_aggregate.h),
// as templates on the float type T, shared by the files that compile them: the entry points in
// csr_softmax_aggregate.cpp pick T and call the instantiation of one of
//   csr_softmax_aggregate_f32.cpp and its f64 twin              (stored scores, csr_softmax)
//   csr_softmax_aggregate_gat_forward_f32.cpp and its f64 twin  (GAT's forward)
//   csr_softmax_aggregate_gat_backward_f32.cpp and its f64 twin (GAT's backward)
// so that a build compiles them side by side: in one file they were the longest step of the CPU
// build (86 s on 2 cores, 123 s on the GPU host's 16). Each dispatches on the graph's offset type
// itself. The row machinery they are made of is attention_rows.h. Included by those files and
// csr_softmax_aggregate.cpp only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/detail/attention_rows.h"
#include "gat/framework/ops/elu_dropout.h"

namespace gat::ops::cpu_impl::csr_aggregate {

using namespace attention_rows;

// Where a row's scores come from: row(scratch, i, b, degree) gives the scores (degree, H) of row
// i's edges [b, b + degree), contiguous in edge order.
// csr_softmax_aggregate's scores are stored (E, H) and read in place.
template <class T>
struct StoredScores {
  const T* s;  // (E, H)
  int64_t H;
  template <class V>
  const T* row(RowScratch<T>&, int64_t, int64_t b, int64_t) const {
    return s + b * H;
  }
  // The scores of edge e's head group starting at head h.
  template <class V>
  GAT_GROUP_FN V score(int64_t e, int64_t, int64_t, int64_t h) const {
    return load_group<V>(s + e * H + h);
  }
};

// GAT's scores LeakyReLU(el[src(e)] + er[i] (+ term[e])), computed into the row's scratch.
template <class T>
struct GatScores {
  const int32_t* src;  // (E,)
  const T* el;         // (Ns, H)
  const T* er;         // (Nd, H)
  const T* term;       // (E, H) or null
  int64_t H;
  // LeakyReLU as x times its factor, 1 or negative_slope, selected lane by lane (x times 1 is x).
  T negative_slope;
  // The scores a training forward keeps for its backward (KeptDecisions::scores, (E, H)), or null.
  // Not yet written (the forward): each row's scores are computed into it rather than into the
  // row's scratch. Written (the backward): a row's scores are read there, not computed again, and
  // LeakyReLU' comes from their sign where negative_slope >= 0, as the score is then positive
  // exactly where its argument is (NaN neither). The same values either way.
  T* kept = nullptr;
  bool kept_written = false;
  GatScores(const Graph& graph, const Tensor& l, const Tensor& r, const Tensor& t, double slope)
      : src(graph.edge_src().data<int32_t>()),
        el(l.data<T>()),
        er(r.data<T>()),
        term(t.defined() ? t.data<T>() : nullptr),
        H(l.size(1)),
        negative_slope(static_cast<T>(slope)) {}
  // The LeakyReLU's argument of edge e = (j -> i), the head group V starting at head h (in
  // gat_edge_scores' order of sums).
  template <class V>
  GAT_GROUP_FN V argument(int64_t e, int64_t j, int64_t i, int64_t h) const {
    const V x = load_group<V>(el + j * H + h) + load_group<V>(er + i * H + h);
    return term ? x + load_group<V>(term + e * H + h) : x;
  }
  // LeakyReLU'(argument)
  template <class V>
  GAT_GROUP_FN V slope(int64_t e, int64_t j, int64_t i, int64_t h) const {
    const V x =
        kept_written && negative_slope >= T(0) ? load_group<V>(kept + e * H + h) : argument<V>(e, j, i, h);
    return x > splat<V>(T(0)) ? splat<V>(T(1)) : splat<V>(negative_slope);
  }
  // The scores of edge e = (j -> i), the head group starting at head h.
  template <class V>
  GAT_GROUP_FN V score(int64_t e, int64_t j, int64_t i, int64_t h) const {
    const V x = argument<V>(e, j, i, h);
    return x * (x > splat<V>(T(0)) ? splat<V>(T(1)) : splat<V>(negative_slope));
  }
  template <class V>
  const T* row(RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) const {
    if (kept_written) return kept + b * H;
    T* s = kept ? kept + b * H : row.s.data();  // (degree, H)
    for (int64_t k = 0; k < degree; ++k)
      for (int64_t h = 0; h < H; h += kLanes<T, V>)
        store_group(s + k * H + h, score<V>(b + k, src[b + k], i, h));
    return s;
  }
};

// The backward of both ops.
// Pass 1 over CSR rows: a = exp(s - lse); for d scores da = G[i].V[j] * keep, the row sum r of
// a * da, ds = a (da - r), then row_end(i, b, degree) (GAT: ds into g in place, d er).
// Pass 2 over the transposed graph, in its fixed (source, destination) order: dV from the
// dropped-out weights a * keep; and, when edge_sum is given, edge_sum[j,h] = sum of ds[e,h] over
// j's out-edges (GAT: d el from g). When pass 1 runs and E H is at most kMaxKeptDecisions, pass 1
// leaves a * keep in an (E, H) buffer that pass 2 reads; a larger graph's pass 2 computes them
// again edge by edge as pass 1 does (the same float operations: the same bits), so that no second
// (E, H) array lives at its memory peak.
// The dropout's decisions as DropFactors takes them from `kept` (or null).
template <class T, class Offset, class Scores, class RowEnd>
void aggregate_backward(const Graph& graph, const Scores& scores, const Tensor& node_value, const Tensor& lse,
                        const Tensor& grad_out, const DropoutKey& attn_dropout, KeepMask* kept,
                        T* ds,        // (E, H) or null
                        T* dV,        // (Ns, H, F) or null
                        T* edge_sum,  // (Ns, H) or null; needs ds
                        RowEnd&& row_end) {
  const int64_t N = graph.num_dst_nodes(), heads = lse.size(1);
  const T* values = node_value.data<T>();  // (Ns, H, F)
  const T* l = lse.data<T>();              // (N, H)
  const T* G = grad_out.data<T>();         // (N, H, F)
  const int64_t grad_count = grad_out.numel();
  const DropFactors<T> drop(attn_dropout, graph.num_edges() * heads, kept);
  const Offset* row_ptr = graph.row_ptr().data<Offset>();      // (N+1,)
  const int32_t* src = graph.edge_src().data<int32_t>();       // (E,)
  const Offset* t_row_ptr = graph.t_row_ptr().data<Offset>();  // (Ns+1,)
  const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();   // (E,)
  const Offset* t_edge_id = graph.t_edge_id().data<Offset>();  // (E,) edge id
  const int64_t weight_count = graph.num_edges() * heads;
  // Not zero-filled (a serial pass): pass 1 writes every edge's weights before pass 2 reads them.
  const std::unique_ptr<T[]> kept_weights(ds && dV && weight_count <= kMaxKeptDecisions
                                              ? new T[static_cast<size_t>(weight_count)]
                                              : nullptr);  // (E, H) or null
  with_head_group<T>(heads, [&](auto group, auto H) {
    using V = typename decltype(group)::type;
    constexpr int64_t W = kLanes<T, V>;
    with_group_width<V, T>(node_value.size(2), [&](auto F) {
      if (ds) {
        for_each_row<T>(row_ptr, N, H, [&, H, F](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
          if (row.prefetch && i + 1 < N) prefetch_rows(values, src, b + degree, row_ptr[i + 2], H * F, H * F);
          drop.fill(b * H, degree * H, row.drop.data());  // (degree, H)
          shifted_exps<V>(scores.template row<V>(row, i, b, degree), degree, H, l + i * H,
                          row.ex.data());  // a (degree, H)
          softmax_row_backward<V>(row, degree, H, F, G + i * H * F, values, src + b, ds + b * H,
                                  kept_weights ? kept_weights.get() + b * H : nullptr);
          row_end(group, i, b, degree);
        });
      }
      if (!dV && !edge_sum) return;
      for_each_row<T>(
          t_row_ptr, graph.num_src_nodes(), H,
          [&, H, F](RowScratch<T>& row, int64_t j, int64_t b, int64_t degree) {
            T* dvj = dV ? dV + j * H * F : nullptr;
            T* sj = edge_sum ? edge_sum + j * H : nullptr;
            if (row.prefetch && j + 1 < graph.num_src_nodes()) {  // the next source's rows of G and ds
              if (dvj) prefetch_rows(G, t_dst, b + degree, t_row_ptr[j + 2], H * F, H * F);
              if (sj) prefetch_rows(ds, t_edge_id, b + degree, t_row_ptr[j + 2], H, H);
            }
            if (sj) std::fill(sj, sj + H, T(0));
            // a~ (degree, H) of j's out-edges: pass 1's, or computed as shifted_exps and
            // softmax_row_backward compute them there (the exponentials in one flat pass, which
            // vectorises)
            T* w = row.ex.data();
            for (int64_t k = 0; k < degree; ++k) {
              const int64_t e = t_edge_id[b + k], i = t_dst[b + k];
              for (int64_t h = 0; sj && h < H; h += W)
                store_group(sj + h, load_group<V>(sj + h) + load_group<V>(ds + e * H + h));
              if (!dvj) continue;
              if (kept_weights) {
                for (int64_t h = 0; h < H; h += W)
                  store_group(w + k * H + h, load_group<V>(kept_weights.get() + e * H + h));
                continue;
              }
              drop.fill(e * H, H, row.drop.data() + k * H);
              for (int64_t h = 0; h < H; h += W)
                store_group(w + k * H + h,
                            scores.template score<V>(e, j, i, h) - load_group<V>(l + i * H + h));
            }
            if (!dvj) return;
            if (!kept_weights) {
              exps_in_blocks(w, degree * H);
              for (int64_t q = 0; q < degree * H; ++q) w[q] *= row.drop[q];
            }
            for (int64_t h = 0; h < H; h += W)  // dV[j, h .. h + W) from G[t_dst[k], h .. h + W)
              aggregate_heads<V>(dvj + h * F, w + h, H, degree, G + h * F, t_dst + b, H * F, F,
                                 grad_count - h * F);
          });
    });
  });
}

// pos_out (N, H, F) and pos_weight (N, H) of the contract, from their definitions: a pass over the
// rows with the forward's weights ex / z, summed over the edges whose LeakyReLU argument is
// positive. (The CPU backward does not read them: its d er sums g over the row's edges.)
template <class T, class Offset>
void positive_sums(const Graph& graph, const GatScores<T>& scores, const Tensor& node_value,
                   const DropoutKey& attn_dropout, KeepMask* kept, Tensor& pos_out, Tensor& pos_weight) {
  const int64_t N = graph.num_dst_nodes(), H = scores.H, F = node_value.size(2);
  T* o = pos_out.data<T>();     // (N, H, F)
  T* w = pos_weight.data<T>();  // (N, H)
  if (F == 0) {
    std::fill(w, w + N * H, T(0));
    return;
  }
  const T* V = node_value.data<T>();  // (Ns, H, F)
  for_each_softmax_row<T, T, Offset>(graph, scores, attn_dropout, kept, H,
                                     [&](RowScratch<T>& row, int64_t i, int64_t b, int64_t degree) {
                                       T* oi = o + i * H * F;
                                       std::fill(oi, oi + H * F, T(0));
                                       for (int64_t h = 0; h < H; ++h) {
                                         T weight = 0;
                                         for (int64_t k = 0; k < degree; ++k) {
                                           const int64_t e = b + k, j = scores.src[e];
                                           if (!(scores.template argument<T>(e, j, i, h) > T(0))) continue;
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

// Where a GAT kernel takes one kind of its decisions, `mask` of KeptDecisions, n of them: the
// forward, which draws them, leaves them there when n is at most kMaxKeptDecisions; the backward
// reads them there when the forward left them. Null (kept null, or neither): the kernel draws its
// own and drops them.
inline KeepMask* kept_mask(KeptDecisions* kept, KeepMask KeptDecisions::*mask, int64_t n, bool forward) {
  if (!kept) return nullptr;
  KeepMask& m = kept->*mask;
  if (forward) return n <= kMaxKeptDecisions ? &m : nullptr;
  return m.size() == n ? &m : nullptr;
}

// The output dropout's decisions for elu_dropout's CPU kernel: the forward's, when it left them in
// `kept` (or null), else drawn again into `drawn` (CUDA's kernels draw their own; a key recorded
// for a CUDA graph never reaches the CPU).
inline const KeepMask& activation_keep(const OutputActivation& activation, const Tensor& out,
                                       KeptDecisions* kept, KeepMask& drawn) {
  if (out.is_cuda() || !activation.dropout.active()) return drawn;
  if (KeepMask* found = kept_mask(kept, &KeptDecisions::activation, out.numel(), false)) return *found;
  drawn = KeepMask(activation.dropout, out.numel());
  return drawn;
}

// ---- the kernels ----

// The implementations of cpu_impl::NAME for inputs of float type T (float or double), which
// cpu_impl::NAME (csr_softmax_aggregate.cpp) picks. Each is compiled in one of the files named above.
template <class T>
struct Kernels {
  static void stored_forward(const CsrSoftmaxAggregateForwardArgs& a);    // csr_softmax_aggregate_forward
  static void stored_backward(const CsrSoftmaxAggregateBackwardArgs& a);  // csr_softmax_aggregate_backward
  static void softmax(const CsrSoftmaxArgs& args);                        // csr_softmax
  static void gat_forward(const GatAttentionForwardArgs& a);              // gat_attention_aggregate_forward
  static void gat_backward(const GatAttentionBackwardArgs& a);            // gat_attention_aggregate_backward
};

// cpu_impl::csr_softmax_aggregate_forward for edge scores of type T.
template <class T>
void Kernels<T>::stored_forward(const CsrSoftmaxAggregateForwardArgs& a) {
  dispatch_offsets(*a.graph, [&](auto offset) {
    const StoredScores<T> scores{a.edge_scores.data<T>(), a.edge_scores.size(1)};
    aggregate_forward<T, decltype(offset)>(*a.graph, scores, a.node_value, a.attn_dropout, nullptr, *a.out,
                                           *a.lse);
  });
}

// cpu_impl::csr_softmax_aggregate_backward for edge scores of type T.
template <class T>
void Kernels<T>::stored_backward(const CsrSoftmaxAggregateBackwardArgs& a) {
  dispatch_offsets(*a.graph, [&](auto offset) {
    const StoredScores<T> scores{a.edge_scores.data<T>(), a.edge_scores.size(1)};
    aggregate_backward<T, decltype(offset)>(*a.graph, scores, a.node_value, a.lse, a.grad_out, a.attn_dropout,
                                            nullptr, a.grad_scores ? a.grad_scores->data<T>() : nullptr,
                                            a.grad_value ? a.grad_value->data<T>() : nullptr, nullptr,
                                            [](auto, int64_t, int64_t, int64_t) {});
  });
}

// cpu_impl::csr_softmax for edge scores of type T.
template <class T>
void Kernels<T>::softmax(const CsrSoftmaxArgs& args) {
  const Graph& graph = *args.graph;
  const int64_t N = graph.num_dst_nodes(), H = args.edge_scores.size(1);
  dispatch_offsets(graph, [&](auto offset) {
    using Offset = decltype(offset);
    const Offset* row_ptr = graph.row_ptr().data<Offset>();  // (N+1,)
    const T* s = args.edge_scores.data<T>();                 // (E, H)
    T* a = args.weights->data<T>();                          // (E, H)
    for_each_row<T>(row_ptr, N, H, [&](RowScratch<T>& row, int64_t, int64_t b, int64_t degree) {
      row_softmax_terms<T>(s + b * H, degree, H, row);
      for (int64_t q = 0; q < degree * H; ++q) a[b * H + q] = row.ex[q] / row.z[q % H];
    });
  });
}

// cpu_impl::gat_attention_aggregate_forward for el, er, edge_term and values of type T: out and
// lse, the positive sums when asked, out_bias added (every row, those without edges too), then
// the activation. source_rows: CUDA only. The decisions go to a.kept when it is given.
template <class T>
void Kernels<T>::gat_forward(const GatAttentionForwardArgs& a) {
  const Graph& graph = *a.graph;
  Tensor& out = *a.out;
  dispatch_offsets(graph, [&](auto offset) {
    using Offset = decltype(offset);
    GatScores<T> scores(graph, a.el, a.er, a.edge_term, a.negative_slope);
    KeepMask* kept = kept_mask(a.kept, &KeptDecisions::attention, graph.num_edges() * scores.H, true);
    if (a.kept && graph.num_edges() * scores.H <= kMaxKeptDecisions) {  // the scores, for the backward
      a.kept->scores = Tensor::empty({graph.num_edges(), scores.H}, a.el.dtype(), Device::cpu, "kept scores");
      scores.kept = a.kept->scores.template data<T>();
    }
    // out_bias (every row, those without edges too) and the activation, as each row is written
    const OutputActivation& activation = a.activation;
    KeepMask* activation_kept = kept_mask(a.kept, &KeptDecisions::activation, out.numel(), true);
    KeepMask drawn;  // the output dropout's decisions when they are not kept
    RowEpilogue<T> epilogue;
    epilogue.bias = a.out_bias.defined() ? a.out_bias.template data<T>() : nullptr;
    epilogue.elu = activation.elu;
    epilogue.alpha = static_cast<T>(activation.alpha);
    if (activation.elu && activation.dropout.active()) {
      KeepMask& mask = activation_kept ? *activation_kept : drawn;
      mask = KeepMask(activation.dropout, out.numel());
      epilogue.keep = mask.data();
      epilogue.keep_scale = static_cast<T>(activation.keep_scale());
    }
    aggregate_forward<T, Offset>(graph, scores, a.node_value, a.attn_dropout, kept, out, *a.lse,
                                 epilogue.bias || epilogue.elu ? &epilogue : nullptr);
    if (a.pos_out)
      positive_sums<T, Offset>(graph, scores, a.node_value, a.attn_dropout, kept, *a.pos_out, *a.pos_weight);
  });
}

// cpu_impl::gat_attention_aggregate_backward for el, er, edge_term and values of type T.
// d scores go to an (E, H) buffer, turned row by row into g = ds * LeakyReLU'(.) whose row sums
// are d er; pass 2 sums g over the out-edges into d el. g is d edge_term: the buffer is
// grad_edge_term when asked, else transient. The sums run in the orders of gat_edge_scores'
// backward, so the results are those of the unfused ops bit for bit. Reads neither out_bias nor
// the positive sums; d bias is the dispatcher's.
template <class T>
void Kernels<T>::gat_backward(const GatAttentionBackwardArgs& a) {
  const Graph& graph = *a.graph;
  const OutputActivation& activation = a.activation;
  Tensor *grad_el = a.grad_el, *grad_er = a.grad_er, *grad_edge_term = a.grad_edge_term;
  KeepMask drawn;
  if (activation.elu)  // the forward's decisions, or drawn again
    elu_dropout_backward(a.out, a.grad_out, activation.alpha, activation.dropout, activation.keep_scale(),
                         activation_keep(activation, a.out, a.kept, drawn), *a.grad_pre);
  const Tensor& grad_in = activation.elu ? *a.grad_pre : a.grad_out;  // of out + out_bias
  dispatch_offsets(graph, [&](auto offset) {
    using Offset = decltype(offset);
    GatScores<T> scores(graph, a.el, a.er, a.edge_term, a.negative_slope);
    const int64_t H = scores.H;
    if (a.kept && a.kept->scores.defined()) {  // the forward's scores
      scores.kept = a.kept->scores.template data<T>();
      scores.kept_written = true;
    }
    const bool transient_g = !grad_edge_term && (grad_el || grad_er);
    // Not zero-filled (a serial pass): pass 1 writes every edge's g before anything reads it.
    const std::unique_ptr<T[]> g_buffer(transient_g ? new T[static_cast<size_t>(graph.num_edges() * H)]
                                                    : nullptr);
    T* g = grad_edge_term ? grad_edge_term->data<T>() : g_buffer.get();  // (E, H) or null
    T* der = grad_er ? grad_er->data<T>() : nullptr;                     // (N, H)
    const int32_t* src = scores.src;
    aggregate_backward<T, Offset>(
        graph, scores, a.node_value, a.lse, grad_in, a.attn_dropout,
        kept_mask(a.kept, &KeptDecisions::attention, graph.num_edges() * H, false), g,
        a.grad_value ? a.grad_value->data<T>() : nullptr, grad_el ? grad_el->data<T>() : nullptr,
        [&](auto group, int64_t i, int64_t b, int64_t degree) {
          using V = typename decltype(group)::type;
          for (int64_t h = 0; h < H; h += kLanes<T, V>) {  // d er: g summed in edge order
            V acc = splat<V>(T(0));
            for (int64_t e = b; e < b + degree; ++e) {
              const V ge = load_group<V>(g + e * H + h) * scores.template slope<V>(e, src[e], i, h);
              store_group(g + e * H + h, ge);
              acc += ge;
            }
            if (der) store_group(der + i * H + h, acc);
          }
        });
  });
}

extern template struct Kernels<float>;
extern template struct Kernels<double>;

}  // namespace gat::ops::cpu_impl::csr_aggregate
