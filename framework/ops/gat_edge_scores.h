// gat_edge_scores: GAT's per-edge attention logits.
//   s[e,h] = LeakyReLU(el[src(e),h] + er[dst(e),h], negative_slope)
// Backward (g = ds * LeakyReLU'(.)):
//   d er[i,h] = sum over edges e into i of g[e,h]          (CSR rows, fixed order)
//   d el[j,h] = sum over edges e out of j of g[e,h]        (transposed graph, fixed order)
#pragma once

#include "gat/framework/graph.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// el, er: (N, H) f32|f64 on the graph's device  ->  (E, H) in the graph's edge order
Tensor gat_edge_scores(const Graph& graph, const Tensor& el, const Tensor& er, double negative_slope);

// The kernels (docs/design.md, the op pattern): forward writes scores (E, H); backward, given
// grad_scores (E, H), writes grad_el (N, H) and/or grad_er (N, H) (either may be null); both
// overwrite. kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
namespace kernels {
void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores);
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er);
}  // namespace kernels
namespace cpu_impl {  // gat_edge_scores.cpp
void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores);
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er);
}  // namespace cpu_impl
namespace cuda_impl {  // gat_edge_scores.cu
void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores);
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er);
}  // namespace cuda_impl

}  // namespace gat::ops
