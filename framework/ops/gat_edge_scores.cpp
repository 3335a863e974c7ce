#include "gat/framework/ops/gat_edge_scores.h"

#include "gat/framework/autograd.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/loops.h"

namespace gat::ops {

namespace cpu_impl {

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores) {
  const int64_t E = graph.num_edges(), H = el.size(1);
  dispatch_float(el.dtype(), "gat_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* src = graph.edge_src().data<int32_t>();   // (E,)
    const int32_t* dst = graph.edge_dst().data<int32_t>();  // (E,)
    const T* l = el.data<T>();                              // (N, H)
    const T* r = er.data<T>();                              // (N, H)
    T* s = scores.data<T>();                                // (E, H)
    // LeakyReLU as x times its factor, read from a table: the signs are random, a branch (what
    // g++ makes of x > 0 ? x : slope * x) would be mispredicted half the time.
    const T factor[2] = {static_cast<T>(negative_slope), T(1)};
#pragma omp parallel for if (E * H > detail::kParallelThreshold)
    for (int64_t e = 0; e < E; ++e)
      for (int64_t h = 0; h < H; ++h) {
        const T x = l[src[e] * H + h] + r[dst[e] * H + h];
        s[e * H + h] = x * factor[x > T(0)];
      }
  });
}

// d er over CSR rows and d el over the transpose, each summed in the graph's fixed order.
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er) {
  const int64_t N = graph.num_nodes(), H = el.size(1);
  dispatch_float(el.dtype(), "gat_edge_scores backward", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* src = graph.edge_src().data<int32_t>();  // (E,)
    const T* l = el.data<T>();                             // (N, H)
    const T* r = er.data<T>();                             // (N, H)
    const T* gs = grad_scores.data<T>();                   // (E, H)
    const T factor[2] = {static_cast<T>(negative_slope), T(1)};  // as the forward
    // g[e,h] = ds[e,h] * LeakyReLU'(el[j,h] + er[i,h])
    auto g = [&](int64_t e, int64_t j, int64_t i, int64_t h) {
      return gs[e * H + h] * factor[l[j * H + h] + r[i * H + h] > T(0)];
    };
    if (grad_er) {
      const int32_t* row_ptr = graph.row_ptr().data<int32_t>();  // (N+1,)
      T* d = grad_er->data<T>();                                 // (N, H)
#pragma omp parallel for schedule(dynamic, 256)
      for (int64_t i = 0; i < N; ++i)
        for (int64_t h = 0; h < H; ++h) {
          T acc = 0;
          for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e) acc += g(e, src[e], i, h);
          d[i * H + h] = acc;
        }
    }
    if (grad_el) {
      const int32_t* t_row_ptr = graph.t_row_ptr().data<int32_t>();  // (N+1,)
      const int32_t* t_dst = graph.t_edge_dst().data<int32_t>();     // (E,)
      const int32_t* t_edge_id = graph.t_edge_id().data<int32_t>();  // (E,) edge id
      T* d = grad_el->data<T>();                                     // (N, H)
#pragma omp parallel for schedule(dynamic, 256)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t h = 0; h < H; ++h) {
          T acc = 0;
          for (int64_t k = t_row_ptr[j]; k < t_row_ptr[j + 1]; ++k)
            acc += g(t_edge_id[k], j, t_dst[k], h);
          d[j * H + h] = acc;
        }
    }
  });
}

}  // namespace cpu_impl

namespace kernels {

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores) {
  if (el.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::gat_edge_scores_forward(graph, el, er, negative_slope, scores));
  cpu_impl::gat_edge_scores_forward(graph, el, er, negative_slope, scores);
}

void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er) {
  if (el.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::gat_edge_scores_backward(graph, el, er, negative_slope,
                                                             grad_scores, grad_el, grad_er));
  cpu_impl::gat_edge_scores_backward(graph, el, er, negative_slope, grad_scores, grad_el, grad_er);
}

}  // namespace kernels

Tensor gat_edge_scores(const Graph& graph, const Tensor& el, const Tensor& er, double negative_slope) {
  const char* op = "gat_edge_scores";
  check_float(op, "el", el);
  check_dim(op, "el", el, 2);
  check_same(op, "el", el, "er", er);
  check_shape(op, "er", er, el.shape());
  GAT_CHECK(el.size(0) == graph.num_nodes(), op, ": 'el' ", el.describe(),
            " must have one row per node of the graph (", graph.num_nodes(), " nodes)");
  GAT_CHECK(graph.device() == el.device(), op, ": the graph is on ", device_name(graph.device()),
            " but 'el' is ", el.describe());

  Tensor scores = Tensor::empty({graph.num_edges(), el.size(1)}, el.dtype(), el.device(), op);
  kernels::gat_edge_scores_forward(graph, el, er, negative_slope, scores);

  const bool need_el = el.requires_grad(), need_er = er.requires_grad();
  return autograd::record(
      op, scores, {el, er},
      [graph, l = el.detach(), r = er.detach(), negative_slope, need_el,
       need_er](const Tensor& grad_scores) {
        check_same("gat_edge_scores backward", "grad_scores", grad_scores, "el", l);
        check_shape("gat_edge_scores backward", "grad_scores", grad_scores,
                    {graph.num_edges(), l.size(1)});
        Tensor dl, dr;
        if (need_el) dl = Tensor::empty(l.shape(), l.dtype(), l.device(), "d el");
        if (need_er) dr = Tensor::empty(r.shape(), r.dtype(), r.device(), "d er");
        Tensor* pl = need_el ? &dl : nullptr;
        Tensor* pr = need_er ? &dr : nullptr;
        kernels::gat_edge_scores_backward(graph, l, r, negative_slope, grad_scores, pl, pr);
        return std::vector<Tensor>{dl, dr};
      });
}

}  // namespace gat::ops
