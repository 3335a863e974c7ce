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

namespace cuda_impl {
void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores);
// grad_scores (E, H) -> grad_el (N, H) and/or grad_er (N, H) (either may be null); overwrites.
void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er);
}  // namespace cuda_impl

}  // namespace gat::ops
