#include "gat/framework/ops/attention/gat_edge_scores.h"

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/detail/attention_dtypes.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                             double negative_slope, Tensor& scores) {
  const int64_t E = graph.num_edges(), H = el.size(1);
  dispatch_float(el.dtype(), "gat_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* src = graph.edge_src().data<int32_t>();             // (E,)
    const int32_t* dst = graph.edge_dst().data<int32_t>();             // (E,)
    const T* l = el.data<T>();                                         // (Ns, H)
    const T* r = er.data<T>();                                         // (Nd, H)
    const T* t = edge_term.defined() ? edge_term.data<T>() : nullptr;  // (E, H) or null
    T* s = scores.data<T>();                                           // (E, H)
    // LeakyReLU as x times its factor, read from a table: the signs are random, a branch (what
    // g++ makes of x > 0 ? x : slope * x) would be mispredicted half the time.
    const T factor[2] = {static_cast<T>(negative_slope), T(1)};
#pragma omp parallel for if (E * H > detail::kParallelThreshold)
    for (int64_t e = 0; e < E; ++e)
      for (int64_t h = 0; h < H; ++h) {
        T x = l[src[e] * H + h] + r[dst[e] * H + h];
        if (t) x += t[e * H + h];
        s[e * H + h] = x * factor[x > T(0)];
      }
  });
}

// d er over CSR rows and d el over the transpose, each summed in the graph's fixed order.
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er, Tensor* grad_edge_term) {
  const int64_t H = el.size(1);
  dispatch_float_offsets(el.dtype(), graph, "gat_edge_scores backward", [&](auto zero, auto offset) {
    using T = decltype(zero);
    using Offset = decltype(offset);
    const int32_t* src = graph.edge_src().data<int32_t>();             // (E,)
    const T* l = el.data<T>();                                         // (Ns, H)
    const T* r = er.data<T>();                                         // (Nd, H)
    const T* t = edge_term.defined() ? edge_term.data<T>() : nullptr;  // (E, H) or null
    const T* gs = grad_scores.data<T>();                               // (E, H)
    const T factor[2] = {static_cast<T>(negative_slope), T(1)};        // as the forward
    // g[e,h] = ds[e,h] * LeakyReLU'(el[j,h] + er[i,h] (+ edge_term[e,h]))
    auto g = [&](int64_t e, int64_t j, int64_t i, int64_t h) {
      T x = l[j * H + h] + r[i * H + h];
      if (t) x += t[e * H + h];
      return gs[e * H + h] * factor[x > T(0)];
    };
    if (grad_edge_term) {
      const int32_t* dst = graph.edge_dst().data<int32_t>();  // (E,)
      T* d = grad_edge_term->data<T>();                       // (E, H)
      const int64_t E = graph.num_edges();
#pragma omp parallel for if (E * H > detail::kParallelThreshold)
      for (int64_t e = 0; e < E; ++e)
        for (int64_t h = 0; h < H; ++h) d[e * H + h] = g(e, src[e], dst[e], h);
    }
    if (grad_er) {
      const Offset* row_ptr = graph.row_ptr().data<Offset>();  // (Nd+1,)
      T* d = grad_er->data<T>();                               // (Nd, H)
#pragma omp parallel for schedule(dynamic, 256)
      for (int64_t i = 0; i < graph.num_dst_nodes(); ++i)
        for (int64_t h = 0; h < H; ++h) {
          T acc = 0;
          for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e) acc += g(e, src[e], i, h);
          d[i * H + h] = acc;
        }
    }
    if (grad_el) {
      const Offset* t_row_ptr = graph.t_row_ptr().data<Offset>();  // (Ns+1,)
      const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();   // (E,)
      const Offset* t_edge_id = graph.t_edge_id().data<Offset>();  // (E,) edge id
      T* d = grad_el->data<T>();                                   // (Ns, H)
#pragma omp parallel for schedule(dynamic, 256)
      for (int64_t j = 0; j < graph.num_src_nodes(); ++j)
        for (int64_t h = 0; h < H; ++h) {
          T acc = 0;
          for (int64_t k = t_row_ptr[j]; k < t_row_ptr[j + 1]; ++k) acc += g(t_edge_id[k], j, t_dst[k], h);
          d[j * H + h] = acc;
        }
    }
  });
}

}  // namespace cpu_impl

namespace kernels {

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                             double negative_slope, Tensor& scores) {
  if (el.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::gat_edge_scores_forward(graph, el, er, edge_term, negative_slope, scores));
  cpu_impl::gat_edge_scores_forward(graph, el, er, edge_term, negative_slope, scores);
}

void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er, Tensor* grad_edge_term) {
  if (el.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::gat_edge_scores_backward(graph, el, er, edge_term, negative_slope,
                                                             grad_scores, grad_el, grad_er, grad_edge_term));
  cpu_impl::gat_edge_scores_backward(graph, el, er, edge_term, negative_slope, grad_scores, grad_el, grad_er,
                                     grad_edge_term);
}

}  // namespace kernels

void check_gat_score_terms(const char* op, const Graph& graph, const Tensor& el, const Tensor& er,
                           const Tensor& edge_term) {
  attention_dtypes::check_attention_float(op, "el", el);
  check_dim(op, "el", el, 2);
  check_same(op, "el", el, "er", er);
  check_dim(op, "er", er, 2);
  GAT_CHECK(graph.device() == el.device(), op, ": the graph is on ", device_name(graph.device()),
            " but 'el' is ", el.describe());
  GAT_CHECK(
      el.size(0) == graph.num_src_nodes() && er.size(0) == graph.num_dst_nodes() && er.size(1) == el.size(1),
      op, ": 'el' ", el.describe(), " and 'er' ", er.describe(),
      " must be (Ns, H) and (Nd, H) with Ns = ", graph.num_src_nodes(),
      " sources and Nd = ", graph.num_dst_nodes(), " destinations of the graph");
  if (!edge_term.defined()) return;
  check_same(op, "el", el, "edge_term", edge_term);
  check_shape(op, "edge_term", edge_term, {graph.num_edges(), el.size(1)});
}

Tensor gat_edge_scores(const Graph& graph, const Tensor& el, const Tensor& er, double negative_slope,
                       const Tensor& edge_term) {
  const char* op = "gat_edge_scores";
  if (detail::bf16_in_f32(op, el, er, edge_term))
    return detail::rounded_to_bf16(gat_edge_scores(graph, detail::widened(el), detail::widened(er),
                                                   negative_slope, detail::widened(edge_term)));
  check_gat_score_terms(op, graph, el, er, edge_term);

  Tensor scores = Tensor::empty({graph.num_edges(), el.size(1)}, el.dtype(), el.device(), op);
  kernels::gat_edge_scores_forward(graph, el, er, edge_term, negative_slope, scores);

  const bool need_el = el.requires_grad(), need_er = er.requires_grad(),
             need_term = edge_term.defined() && edge_term.requires_grad();
  return autograd::record(
      op, scores, {el, er, edge_term},
      [graph, l = el.detach(), r = er.detach(), t = edge_term.defined() ? edge_term.detach() : Tensor(),
       negative_slope, need_el, need_er, need_term](const Tensor& grad_scores) {
        check_same("gat_edge_scores backward", "grad_scores", grad_scores, "el", l);
        check_shape("gat_edge_scores backward", "grad_scores", grad_scores, {graph.num_edges(), l.size(1)});
        Tensor dl, dr, dt;
        if (need_el) dl = Tensor::empty(l.shape(), l.dtype(), l.device(), "d el");
        if (need_er) dr = Tensor::empty(r.shape(), r.dtype(), r.device(), "d er");
        if (need_term) dt = Tensor::empty(t.shape(), t.dtype(), t.device(), "d edge_term");
        kernels::gat_edge_scores_backward(graph, l, r, t, negative_slope, grad_scores,
                                          need_el ? &dl : nullptr, need_er ? &dr : nullptr,
                                          need_term ? &dt : nullptr);
        return std::vector<Tensor>{dl, dr, dt};
      });
}

}  // namespace gat::ops
