// gatv2_attention_aggregate: GATv2's attention (Brody et al. 2022) fused into the softmax
// aggregate, without any tensor of size E x H x F (maths, schedules, what is saved and
// recomputed: docs/kernels.md).
//
// For every edge e = (j -> i) of the graph and head h:
//   x[e,h,f]   = xl[j,h,f] + xr[i,h,f] (+ edge_term[e,h,f] when it is defined)
//   s[e,h]     = sum_f att[h,f] * LeakyReLU(x[e,h,f], negative_slope)
//   a[e,h]     = softmax over row i's edges of s[e,h]
//   a~[e,h]    = a[e,h] * keep[e,h] / (1 - p)      (attention dropout; keep index = e * H + h,
//                                                   as csr_softmax_aggregate)
//   out[i,h,:] = sum_e a~[e,h] * xl[j,h,:]          (zero for a row without edges)
// This is PyG's GATv2Conv message: xl = lin_l(x) is both the source term and the value, xr =
// lin_r(x) the destination term, edge_term = lin_edge(edge_attr). Scores are computed where an
// edge is visited; only the log-sum-exp (Nd, H) (and the output) are saved, the backward
// recomputes scores and weights and regenerates the dropout mask. Results are bitwise
// reproducible (no float atomics; on the CPU, for any thread count).
#pragma once

#include "gat/framework/graph.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// graph: Ns = graph.num_src_nodes() sources, Nd = graph.num_dst_nodes() destinations, E edges, on
// the tensors' device.
// xl: (Ns, H, F) f32|f64   xr: (Nd, H, F)   att: (H, F)   edge_term: (E, H, F) or undefined,
// all of one dtype and device; negative_slope finite; attention dropout rate in [0, 1).
// -> out (Nd, H, F). Gradients for xl (value and score paths), xr, att and edge_term.
Tensor gatv2_attention_aggregate(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                 const Tensor& att, double negative_slope,
                                 const DropoutKey& attn_dropout = {},
                                 const Tensor& edge_term = Tensor());

// The scores s (E, H) alone, without autograd: for inspecting the attention (then
// ops::csr_softmax gives the weights). Same inputs and checks as gatv2_attention_aggregate.
Tensor gatv2_edge_scores(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                         double negative_slope, const Tensor& edge_term = Tensor());

// Checks the op's inputs (those of gatv2_attention_aggregate and gatv2_edge_scores, which share
// them) against each other and the graph; throws a gat::Error naming `op` and the tensor.
void check_gatv2_inputs(const char* op, const Graph& graph, const Tensor& xl, const Tensor& xr,
                        const Tensor& att, double negative_slope, const Tensor& edge_term);

// ---- the kernels behind the op (docs/design.md, the op pattern) ----
// edge_term may be undefined (no edge term) in all of them.
//  forward:     writes out (Nd, H, F) and lse (Nd, H) (lse = -inf for a row without edges).
//  backward:    given the forward's out and lse and grad_out (Nd, H, F), writes grad_xl (Ns, H, F),
//               grad_xr (Nd, H, F), grad_att (H, F) and grad_edge_term (E, H, F); any may be null
//               (skipped). Overwrites, never accumulates.
//  edge_scores: writes scores (E, H).
//  None synchronises with the host.
// kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device; all three have one contract.
namespace kernels {
void gatv2_attention_aggregate_forward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                       const Tensor& att, double negative_slope,
                                       const DropoutKey& attn_dropout, const Tensor& edge_term,
                                       Tensor& out, Tensor& lse);
void gatv2_attention_aggregate_backward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                        const Tensor& att, double negative_slope,
                                        const DropoutKey& attn_dropout, const Tensor& edge_term,
                                        const Tensor& out, const Tensor& lse,
                                        const Tensor& grad_out, Tensor* grad_xl, Tensor* grad_xr,
                                        Tensor* grad_att, Tensor* grad_edge_term);
void gatv2_edge_scores(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                       double negative_slope, const Tensor& edge_term, Tensor& scores);
}  // namespace kernels
namespace cpu_impl {  // gatv2_attention_aggregate.cpp
void gatv2_attention_aggregate_forward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                       const Tensor& att, double negative_slope,
                                       const DropoutKey& attn_dropout, const Tensor& edge_term,
                                       Tensor& out, Tensor& lse);
void gatv2_attention_aggregate_backward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                        const Tensor& att, double negative_slope,
                                        const DropoutKey& attn_dropout, const Tensor& edge_term,
                                        const Tensor& out, const Tensor& lse,
                                        const Tensor& grad_out, Tensor* grad_xl, Tensor* grad_xr,
                                        Tensor* grad_att, Tensor* grad_edge_term);
void gatv2_edge_scores(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                       double negative_slope, const Tensor& edge_term, Tensor& scores);
}  // namespace cpu_impl
namespace cuda_impl {  // gatv2_attention_aggregate.cu
void gatv2_attention_aggregate_forward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                       const Tensor& att, double negative_slope,
                                       const DropoutKey& attn_dropout, const Tensor& edge_term,
                                       Tensor& out, Tensor& lse);
void gatv2_attention_aggregate_backward(const Graph& graph, const Tensor& xl, const Tensor& xr,
                                        const Tensor& att, double negative_slope,
                                        const DropoutKey& attn_dropout, const Tensor& edge_term,
                                        const Tensor& out, const Tensor& lse,
                                        const Tensor& grad_out, Tensor* grad_xl, Tensor* grad_xr,
                                        Tensor* grad_att, Tensor* grad_edge_term);
void gatv2_edge_scores(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                       double negative_slope, const Tensor& edge_term, Tensor& scores);
}  // namespace cuda_impl

}  // namespace gat::ops
