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
// edge is visited. The log-sum-exp (Nd, H) and the output are saved; on CUDA, when a gradient is
// needed, also the scores (E, H) and the signs of x (one bit per (e, h, f)), so that the backward
// gathers neither xr[i] nor et[e] again. The backward regenerates the dropout mask. Results are
// bitwise reproducible (no float atomics; on the CPU, for any thread count).
// bf16 inputs (CPU only, for now): computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include "gat/framework/graph.h"
#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// graph: Ns = graph.num_src_nodes() sources, Nd = graph.num_dst_nodes() destinations, E edges, on
// the tensors' device.
// xl: (Ns, H, F) f32|f64   xr: (Nd, H, F)   att: (H, F)   edge_term: (E, H, F) or undefined,
// all of one dtype and device; negative_slope finite; attention dropout rate in [0, 1).
// -> out (Nd, H, F). Gradients for xl (value and score paths), xr, att and edge_term.
Tensor gatv2_attention_aggregate(const Graph& graph, const Tensor& xl, const Tensor& xr, const Tensor& att,
                                 double negative_slope, const DropoutKey& attn_dropout = {},
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
// Each kernel's arguments are one struct below; kernels::NAME, cpu_impl::NAME
// (gatv2_attention_aggregate.cpp) and cuda_impl::NAME (gatv2_attention_aggregate.cu) all take it
// (GAT_DECLARE_KERNEL, kernel.h). kernels:: runs cpu_impl:: or cuda_impl:: by the tensors'
// device; all three have one contract. Outputs are Tensor*; those marked "or null" may be null
// (skipped). Overwrites, never accumulates. None synchronises with the host.

// The scores' inputs, shared by the three kernels.
struct Gatv2ScoreInputs {
  const Graph* graph = nullptr;  // Ns sources, Nd destinations, E edges, on the tensors' device
  Tensor xl{};                   // (Ns, H, F) f32|f64
  Tensor xr{};                   // (Nd, H, F)
  Tensor att{};                  // (H, F)
  double negative_slope = 0.0;   // LeakyReLU's
  Tensor edge_term{};            // (E, H, F) or undefined (no edge term)
};

// edge_scores: writes scores.
struct Gatv2EdgeScoresArgs : Gatv2ScoreInputs {
  Tensor* scores = nullptr;  // (E, H)
};
GAT_DECLARE_KERNEL(gatv2_edge_scores, Gatv2EdgeScoresArgs)

// The inputs of the forward and backward.
struct Gatv2AttentionInputs : Gatv2ScoreInputs {
  DropoutKey attn_dropout{};  // inactive: none
};

// The signs of an edge, packed: head h's F bits start at bit h P of the edge's words, P being
// the power of two covering F (P = 1 for F <= 1), and the bits between heads are zero. An edge
// has ceil(H P / 32) words (none for F = 0): the signs tensor is (E, gatv2_sign_words(H, F)) i32.
inline int64_t gatv2_sign_head_bits(int64_t F) {
  int64_t P = 1;
  while (P < F) P *= 2;
  return P;
}
inline int64_t gatv2_sign_words(int64_t H, int64_t F) {
  return F == 0 ? 0 : (H * gatv2_sign_head_bits(F) + 31) / 32;
}

// forward: writes out and lse (lse = -inf for a row without edges). With scores and signs (both or
// neither) also, for every edge e and head h, the score s[e,h] and the signs of the LeakyReLU's
// argument: with q = h P + f, bit q % 32 of signs[e, q / 32] is set when x[e,h,f] > 0 (the other
// bits are zero). These are what the CUDA backward reads in place of gathering xr[i] and et[e]
// again.
struct Gatv2AttentionForwardArgs : Gatv2AttentionInputs {
  Tensor* out = nullptr;     // (Nd, H, F)
  Tensor* lse = nullptr;     // (Nd, H)
  Tensor* scores = nullptr;  // (E, H) or null
  Tensor* signs = nullptr;   // (E, gatv2_sign_words(H, F)) i32 or null
};
GAT_DECLARE_KERNEL(gatv2_attention_aggregate_forward, Gatv2AttentionForwardArgs)

// backward: given the forward's out and lse and grad_out, writes grad_xl, grad_xr, grad_att and
// grad_edge_term; any may be null (skipped). scores and signs are the forward's, or undefined
// (both or neither): CUDA then computes them first, in one more pass over the edges that gathers
// xl[j]; the CPU reads neither. CUDA spends the scores: it overwrites them with the gradient of
// the scores (E, H), its scratch between two passes, so they serve one backward.
struct Gatv2AttentionBackwardArgs : Gatv2AttentionInputs {
  Tensor out{};                      // (Nd, H, F), the forward's
  Tensor lse{};                      // (Nd, H), the forward's
  Tensor scores{};                   // (E, H), the forward's (overwritten on CUDA), or undefined
  Tensor signs{};                    // (E, gatv2_sign_words(H, F)) i32, the forward's, or undefined
  Tensor grad_out{};                 // (Nd, H, F)
  Tensor* grad_xl = nullptr;         // (Ns, H, F) or null
  Tensor* grad_xr = nullptr;         // (Nd, H, F) or null
  Tensor* grad_att = nullptr;        // (H, F) or null
  Tensor* grad_edge_term = nullptr;  // (E, H, F) or null
};
GAT_DECLARE_KERNEL(gatv2_attention_aggregate_backward, Gatv2AttentionBackwardArgs)

}  // namespace gat::ops
