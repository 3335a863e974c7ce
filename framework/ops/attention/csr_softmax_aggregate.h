// csr_softmax_aggregate: the fused CSR softmax-aggregate op (maths, schedules, what is saved
// and recomputed: docs/kernels.md).
//
// For every destination i (a row of the graph's CSR by destination) and head h:
//   a[e,h]     = softmax over e in row i of edge_scores[e,h]
//   a~[e,h]    = a[e,h] * keep[e,h] / (1 - p)      (attention dropout; keep from the Philox key)
//   out[i,h,:] = sum_e a~[e,h] * node_value[src(e),h,:]          (zero when i has no edge)
// Backward gives d edge_scores and d node_value. Only the log-sum-exp (N, H) is saved; the
// weights are recomputed and the dropout mask regenerated (keep index = e * H + h).
// Usable on its own with any edge scores (GAT, GATv2, transformer-style attention).
//
// gat_attention_aggregate is the same op with GAT's scores computed where an edge is visited,
//   edge_scores[e,h] = LeakyReLU(el[src(e),h] + er[dst(e),h] (+ edge_term[e,h]), negative_slope)
// (edge_term: the optional edge-feature part, PyG's alpha_edge),
// so nothing of size E x H is written by the forward or kept for the backward (which recomputes
// the scores from el and er); one kernel body serves both ops, the scores being the only
// difference.
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md). On the CPU the
// f32 op runs on widened copies; on CUDA csr_softmax_aggregate and gat_attention_aggregate read
// and write bf16 rows in their own kernels (sums in f32; lse and pos_weight f32, and a bias beside
// bf16 rows f32, a parameter), while gat_projected_attention and gat_linear_attention still run on
// widened copies there too.
#pragma once

#include "gat/framework/graph.h"
#include "gat/framework/ops/kernel.h"
#include "gat/framework/rng.h"
#include "gat/framework/rng_cpu.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// What a GAT op below applies to its output (out + bias) before returning it, inside its
// kernels: with elu set,
//   result = elu_dropout(out + bias, alpha, dropout)      (elu_dropout.h; the keep index is the
//                                                          flat index of the (Nd, H, F) result)
// GATConv's output activation (the GAT paper's first layer: ELU, then the next layer's input
// dropout). The result is then the only (Nd, H, F) tensor kept: the backward takes elu_dropout's
// gradient from it and, where it needs the ELU's input, inverts the ELU (CUDA). Without elu the
// result is out + bias.
struct OutputActivation {
  bool elu = false;
  double alpha = 1.0;         // >= 0
  DropoutKey dropout;         // after the ELU; inactive: none
  double keep_scale() const;  // elu_dropout's: 1 / (1 - p), or 1 for an inactive key
};

// graph: N nodes, E edges, on the tensors' device
// edge_scores: (E, H) f32|f64|bf16    node_value: (N, H, F) same dtype/device   -> out (N, H, F)
Tensor csr_softmax_aggregate(const Graph& graph, const Tensor& edge_scores, const Tensor& node_value,
                             const DropoutKey& attn_dropout = {});

// = csr_softmax_aggregate(graph, gat_edge_scores(graph, el, er, negative_slope, edge_term),
//                         node_value, attn_dropout)
// el: (Ns, H) f32|f64|bf16, er: (Nd, H), edge_term: (E, H) or undefined, node_value: (Ns, H, F), all
// of one dtype and device   -> out (Nd, H, F)
// bias: (H, F), (H F) or undefined, added to every row of out (GATConv's bias over concatenated
// heads, taken in its own shape: its gradient then goes to the parameter with no reshape between,
// which lets the backward pass leave its sum to the side stream, docs/design.md): the tensor
// returned is then the one the backward keeps, one (Nd, H, F) block instead of two.
// activation: applied to out + bias (OutputActivation above).
// Saves lse (Nd, H) and out, and on CUDA, when er needs a gradient, pos_out (Nd, H, F) and
// pos_weight (Nd, H) (below: d er without an edge pass), whose storage d node_value then reuses;
// on the CPU, when a gradient is needed, the dropout decisions of each kind that has at most
// kMaxKeptDecisions of them, and the scores under the same bound (KeptDecisions, below; the others
// are drawn or computed again);
// gradients for el, er, edge_term, node_value and bias.
Tensor gat_attention_aggregate(const Graph& graph, const Tensor& el, const Tensor& er,
                               const Tensor& node_value, double negative_slope,
                               const DropoutKey& attn_dropout = {}, const Tensor& edge_term = Tensor(),
                               const Tensor& bias = Tensor(), const OutputActivation& activation = {});

// GAT's attention over one projection wh (N, H, F) of a graph's N nodes (sources and
// destinations alike), GATConv's common case:
//   = gat_attention_aggregate(graph, head_dot(wh, att_src), head_dot(wh, att_dst),
//                             dropout(wh, value_dropout), negative_slope, attn_dropout,
//                             edge_term, bias, activation)
// att_src, att_dst: (H, F), bias: (H, F), (H F) or undefined, edge_term: (E, H) or undefined  -> (N, H, F)
// The same forward; the backward writes d wh in one pass (ops::kernels::head_dot_pair_grad_x)
// where the composition takes dropout's backward, two head_dot backwards and two gradient sums,
// and in d values' storage. Gradients for wh, att_src, att_dst, edge_term and bias.
Tensor gat_projected_attention(const Graph& graph, const Tensor& wh, const Tensor& att_src,
                               const Tensor& att_dst, double negative_slope,
                               const DropoutKey& attn_dropout = {}, const DropoutKey& value_dropout = {},
                               const Tensor& edge_term = Tensor(), const Tensor& bias = Tensor(),
                               const OutputActivation& activation = {});

// gat_projected_attention of the projection x W, which is never stored:
//   = gat_projected_attention(graph, reshape(matmul(x, weight), {N, H, F}), att_src, att_dst,
//                             negative_slope, attn_dropout, value_dropout, edge_term, bias,
//                             activation)
// x: (N, K) f32|f64, weight: (K, H F), att_src, att_dst: (H, F), bias: (H, F), (H F) or undefined,
// edge_term: (E, H) or undefined, all of one dtype and device  -> (N, H, F)
// GATConv's first layer when its input is narrower than the projection (K < H F): the values
// and el, er are written from x in one pass, and the backward reads x and d values, not the
// projection (linear_head_dot.h). Gradients for x, weight, att_src, att_dst, edge_term and bias.
Tensor gat_linear_attention(const Graph& graph, const Tensor& x, const Tensor& weight, const Tensor& att_src,
                            const Tensor& att_dst, double negative_slope, const DropoutKey& attn_dropout = {},
                            const DropoutKey& value_dropout = {}, const Tensor& edge_term = Tensor(),
                            const Tensor& bias = Tensor(), const OutputActivation& activation = {});

// The softmax weights a (E, H) alone, without dropout and without autograd: for inspection
// (GATConv::forward's `attention`).
Tensor csr_softmax(const Graph& graph, const Tensor& edge_scores);

// ---- the kernels behind the op (docs/design.md, the op pattern) ----
// Each kernel's arguments are one struct below; kernels::NAME, cpu_impl::NAME (csr_softmax_aggregate.cpp)
// and cuda_impl::NAME (csr_softmax_aggregate.cu) all take it (GAT_DECLARE_KERNEL, kernel.h); the
// implementations run code compiled per dtype in files of their own (docs/design.md).
// kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device; all three have one contract.
// Outputs are Tensor*; those marked "or null" may be null to skip them. Kernels overwrite their
// outputs, never accumulate. None synchronises with the host (on CUDA: the launches it makes are
// in docs/kernels.md).
// The CUDA kernels' packed rows: 16 values (64 bytes of f32), which the DRAM serves with one
// access where two arrays' rows at one index cost two (bench/gather_ceiling.cu; each row's start
// aligned to 64 bytes). The walk packs a destination's gradient, er, lse and D in one when
// H F + 3 H fit; gat_projected_attention a source's values and el when they fit
// (packs_source_row).
constexpr int kPackedRow = 16;

// Whether a source's H F values of value_bytes each and its H el of stat_bytes each (f32 beside
// bf16 values, else the values' own size) fit a packed row of kPackedRow values, el starting on a
// whole stat after the values: f32 and f64 H F + H <= 16, bf16 (32-byte rows) H F + 2 H <= 16
// with H F even.
constexpr bool packs_source_row(int64_t H, int64_t F, int64_t value_bytes, int64_t stat_bytes) {
  return H * F * value_bytes % stat_bytes == 0 &&
         H * F * value_bytes + H * stat_bytes <= kPackedRow * value_bytes;
}

// csr_softmax_aggregate's inputs, shared by its forward and backward.
struct CsrSoftmaxAggregateInputs {
  const Graph* graph = nullptr;  // N destinations, Ns sources, E edges, on the tensors' device
  Tensor edge_scores{};          // (E, H) f32|f64, or bf16 (CUDA)
  Tensor node_value{};           // (Ns, H, F), edge_scores' dtype and device
  DropoutKey attn_dropout{};     // inactive: none
};

// forward: writes out and lse (lse = -inf for a row with no edges).
struct CsrSoftmaxAggregateForwardArgs : CsrSoftmaxAggregateInputs {
  Tensor* out = nullptr;  // (N, H, F)
  Tensor* lse = nullptr;  // (N, H), f32 for bf16 rows
};
GAT_DECLARE_KERNEL(csr_softmax_aggregate_forward, CsrSoftmaxAggregateForwardArgs)

// backward: given grad_out, writes grad_scores and/or grad_value (either may be null to skip it).
struct CsrSoftmaxAggregateBackwardArgs : CsrSoftmaxAggregateInputs {
  Tensor lse{};                   // (N, H), the forward's
  Tensor grad_out{};              // (N, H, F)
  Tensor* grad_scores = nullptr;  // (E, H) or null
  Tensor* grad_value = nullptr;   // (Ns, H, F) or null
};
GAT_DECLARE_KERNEL(csr_softmax_aggregate_backward, CsrSoftmaxAggregateBackwardArgs)

// softmax: writes weights, the row softmax of edge_scores.
struct CsrSoftmaxArgs {
  const Graph* graph = nullptr;  // N destinations, E edges, on edge_scores' device
  Tensor edge_scores{};          // (E, H) f32|f64
  Tensor* weights = nullptr;     // (E, H)
};
GAT_DECLARE_KERNEL(csr_softmax, CsrSoftmaxArgs)

// The dropout decisions (a byte each) that a GAT op's CPU forward draws, kept for its backward,
// which then reads them instead of drawing them again: the attention dropout's, of the E H (edge,
// head) indices, and the output activation's, of the N H F output elements. Each is empty until
// the forward draws it (an inactive key draws nothing). Beside them the attention scores
// LeakyReLU(el[src] + er[dst] (+ edge_term)) (E, H), which the forward computes and the backward
// then reads instead of computing them again; undefined until the forward writes them.
struct KeptDecisions {
  KeepMask attention, activation;
  Tensor scores;
};
// The ops keep a step's decisions when there are at most this many of each kind (4 MB), and
// its scores when E H is at most this (16 MB in f32): a small graph's backward then draws nothing
// and computes no score, while a large graph's memory peak (its first layer's backward) holds no
// more than it did.
constexpr int64_t kMaxKeptDecisions = int64_t{1} << 22;

// gat_attention_aggregate's inputs, shared by its forward and backward: the scores are computed
// from el, er and edge_term where an edge is visited.
struct GatAttentionInputs {
  const Graph* graph = nullptr;  // N destinations, Ns sources, E edges, on the tensors' device
  Tensor el{};                   // (Ns, H) f32|f64, or bf16 (CUDA)
  Tensor er{};                   // (N, H)
  Tensor edge_term{};            // (E, H) or undefined (no edge term)
  Tensor node_value{};           // (Ns, H, F), el's dtype and device
  double negative_slope = 0.0;   // LeakyReLU's
  DropoutKey attn_dropout{};     // inactive: none
  // H F values (f32 beside bf16 rows), or undefined for none. The forward writes out plus it
  // (rows without edges too); the backward's `out` may hold the forward's out plus out_bias,
  // which D then takes off.
  Tensor out_bias{};
  // (both kernels; elu set): the forward writes out through it (OutputActivation, after
  // out_bias); the backward then takes `out` as the activation's output and grad_out as its
  // gradient, writes grad_pre (N, H, F), the gradient of its input (out + out_bias), and goes on
  // with grad_pre where grad_out is read below. CUDA draws the decisions again and takes the
  // ELU's input from out; the CPU needs no ELU input, and takes its decisions as `kept` says.
  OutputActivation activation{};
  // CPU only, or null: the forward draws the attention and activation decisions into it, and the
  // backward reads those it finds there (a mask of the right count) instead of drawing them
  // again. Null: each kernel draws its own.
  KeptDecisions* kept = nullptr;
};

// gat forward: as csr_softmax_aggregate's forward, with the scores of GatAttentionInputs.
// When pos_out and pos_weight are given (both or neither) also, over the edges e of row i whose
// LeakyReLU argument x[e,h] = el[src(e),h] + er[i,h] (+ edge_term[e,h]) is positive,
//   pos_out[i,h,:] = sum a~[e,h] node_value[src(e),h,:]    and    pos_weight[i,h] = sum a[e,h];
// zero for a row without edges, and pos_weight zero when F = 0. pos_out never has out_bias added.
// bf16 rows (CUDA) keep what the backward needs in f32 without an f32 copy of out (docs/precision.md):
// pos_out then holds pos_out - pos_weight out (out without bias and activation), formed in f32,
// and out_low, when given, out's rounding error: each value of out in f32 less out itself.
struct GatAttentionForwardArgs : GatAttentionInputs {
  Tensor* out = nullptr;         // (N, H, F)
  Tensor* lse = nullptr;         // (N, H), f32 for bf16 rows; -inf for a row with no edges
  Tensor* pos_out = nullptr;     // (N, H, F) or null
  Tensor* pos_weight = nullptr;  // (N, H) or null, f32 for bf16 rows
  Tensor* out_low = nullptr;     // (N, H, F) or null; bf16 rows only (CUDA)
  // (Ns, kPackedRow) of node_value's dtype, or undefined for none; CUDA only, where
  // packs_source_row: row j starts with node_value[j,:,:], then el[j,:] in el's dtype (f32 in a
  // bf16 row, its bytes right after the values), the same numbers as those tensors, and the
  // forward reads them there: one 64-byte access an edge (32 bytes in bf16) where the two tensors
  // cost two.
  Tensor source_rows{};
};
GAT_DECLARE_KERNEL(gat_attention_aggregate_forward, GatAttentionForwardArgs)

// gat backward: given the forward's out and lse and grad_out, writes grad_el, grad_er,
// grad_edge_term (only with edge_term defined) and/or grad_value (any may be null). With
// D[i,h] = grad_out[i,h,:] . out[i,h,:],
//   grad_er[i,h] = (1 - negative_slope) (grad_out[i,h,:] . pos_out[i,h,:] - D[i,h] pos_weight[i,h])
// (the sum over row i of d scores * LeakyReLU'(x), as sum_e a = 1 and the softmax gradients of
// a row sum to 0): CUDA computes grad_er so, per (node, head), and needs pos_out and pos_weight
// from the forward for it (heads of at most 32 vectors; wider ones, and the CPU, sum grad_er over
// the edges and read neither, which may be undefined there). grad_value may be pos_out's storage:
// pos_out is read first. For bf16 rows D is taken from out + out_low (out alone where out_low is
// undefined) and grad_er = (1 - negative_slope) grad_out[i,h,:] . pos_out[i,h,:], pos_out being
// the forward's difference.
// grad_bias (null to skip): H F values, d out_bias: the column sums over the N rows of the
// gradient of out + out_bias (grad_pre, or grad_out without an activation), zero for N = 0. CUDA
// sums them in head_rows_dot's pass where the heads allow (bias_in_rows), all in double either
// way. With bias_partials (null to skip) CUDA leaves that pass's blocks' partial sums there,
// (blocks, H F) f64, and grad_bias unwritten: bias_from_partials then writes it (the caller may
// queue it beside other work). bias_partials stays undefined where d bias was written.
struct GatAttentionBackwardArgs : GatAttentionInputs {
  Tensor out{};                      // (N, H, F), the forward's (see out_bias, activation)
  Tensor lse{};                      // (N, H), the forward's
  Tensor pos_out{};                  // (N, H, F), the forward's, or undefined (see above)
  Tensor pos_weight{};               // (N, H), the forward's, or undefined (see above)
  Tensor out_low{};                  // (N, H, F), the forward's (bf16 rows), or undefined
  Tensor grad_out{};                 // (N, H, F)
  Tensor* grad_el = nullptr;         // (Ns, H) or null
  Tensor* grad_er = nullptr;         // (N, H) or null
  Tensor* grad_edge_term = nullptr;  // (E, H) or null
  Tensor* grad_value = nullptr;      // (Ns, H, F) or null
  Tensor* grad_pre = nullptr;        // (N, H, F); needed with activation.elu, else null
  Tensor* grad_bias = nullptr;       // H F values or null
  Tensor* bias_partials = nullptr;   // or null (CUDA; above)
  // Set by kernels:: for the implementations, which write true there when they took d bias
  // (CUDA, in head_rows_dot's pass where bias_in_rows allows: grad_bias written, or its partials
  // left in *bias_partials when given); kernels:: sums it otherwise (the CPU never takes it).
  // Callers of kernels:: leave it null.
  bool* bias_taken = nullptr;
};
GAT_DECLARE_KERNEL(gat_attention_aggregate_backward, GatAttentionBackwardArgs)

// bias_from_partials: grad_bias = the column sums of partials, added in block order (CUDA only:
// only CUDA leaves partials; the CPU's throws).
struct BiasFromPartialsArgs {
  Tensor partials{};            // (blocks, H F) f64
  Tensor* grad_bias = nullptr;  // H F values
};
GAT_DECLARE_KERNEL(bias_from_partials, BiasFromPartialsArgs)

}  // namespace gat::ops
