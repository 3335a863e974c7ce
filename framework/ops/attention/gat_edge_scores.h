// gat_edge_scores: GAT's per-edge attention logits.
//   s[e,h] = LeakyReLU(el[src(e),h] + er[dst(e),h] (+ edge_term[e,h]), negative_slope)
// edge_term is optional: PyG's alpha_edge, the edge features' part of the score (GATConv with
// edge_dim). Backward (g = ds * LeakyReLU'(.)):
//   d er[i,h] = sum over edges e into i of g[e,h]          (CSR rows, fixed order)
//   d el[j,h] = sum over edges e out of j of g[e,h]        (transposed graph, fixed order)
//   d edge_term[e,h] = g[e,h]
// bf16 inputs (CPU only, for now): computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include "gat/framework/graph.h"
#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// el: (Ns, H), er: (Nd, H) f32|f64 on the graph's device, edge_term: (E, H) like them or
// undefined  ->  (E, H) in the graph's edge order
Tensor gat_edge_scores(const Graph& graph, const Tensor& el, const Tensor& er, double negative_slope,
                       const Tensor& edge_term = Tensor());

// Checks el, er and edge_term (undefined or (E, H)) against each other and the graph (shared with
// gat_attention_aggregate); throws a gat::Error naming `op` and the tensor.
void check_gat_score_terms(const char* op, const Graph& graph, const Tensor& el, const Tensor& er,
                           const Tensor& edge_term);

// The kernels (docs/design.md, the op pattern): forward writes scores (E, H); backward, given
// grad_scores (E, H), writes grad_el (Ns, H), grad_er (Nd, H) and/or grad_edge_term (E, H) (any
// may be null; grad_edge_term only with edge_term defined); both overwrite. edge_term may be an
// undefined Tensor. kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(gat_edge_scores_forward,
                      (const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                       double negative_slope, Tensor& scores))
GAT_DECLARE_KERNEL_FN(gat_edge_scores_backward,
                      (const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                       double negative_slope, const Tensor& grad_scores, Tensor* grad_el, Tensor* grad_er,
                       Tensor* grad_edge_term))

}  // namespace gat::ops
