#include "gat/framework/ops/attention/csr_softmax_aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/detail/attention_dtypes.h"
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_rows.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/attention/linear_head_dot.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/rng_cpu.h"

namespace gat::ops {

namespace {

using namespace attention_dtypes;
using attention_rows::check_dropout;
using cpu_impl::csr_aggregate::activation_keep;

// Whether an op with these inputs takes bf16 through f32 (detail::bf16_in_f32): on the CPU, the
// reference. On CUDA the kernels read and write bf16 rows themselves (docs/precision.md).
template <class... T>
bool bf16_through_f32(const char* op, const Tensor& device_of, const T&... tensors) {
  return !device_of.is_cuda() && detail::bf16_in_f32(op, tensors...);
}

// Checks the graph/scores pair shared by both ops; returns H.
int64_t check_scores(const char* op, const Graph& graph, const Tensor& edge_scores) {
  check_attention_float(op, "edge_scores", edge_scores);
  check_dim(op, "edge_scores", edge_scores, 2);
  GAT_CHECK(edge_scores.size(0) == graph.num_edges(), op, ": 'edge_scores' ", edge_scores.describe(),
            " must have one row per edge of the graph (", graph.num_edges(), " edges)");
  GAT_CHECK(graph.device() == edge_scores.device(), op, ": the graph is on ", device_name(graph.device()),
            " but 'edge_scores' is ", edge_scores.describe());
  return edge_scores.size(1);
}

}  // namespace

double OutputActivation::keep_scale() const { return dropout.active() ? dropout_keep_scale(dropout) : 1.0; }

namespace cpu_impl {

// Each runs the instantiation for the inputs' float type, compiled in a file of its own
// (detail/csr_softmax_aggregate_rows.h).

void csr_softmax_aggregate_forward(const CsrSoftmaxAggregateForwardArgs& a) {
  dispatch_float(a.edge_scores.dtype(), "csr_softmax_aggregate",
                 [&](auto zero) { csr_aggregate::Kernels<decltype(zero)>::stored_forward(a); });
}

void csr_softmax_aggregate_backward(const CsrSoftmaxAggregateBackwardArgs& a) {
  dispatch_float(a.edge_scores.dtype(), "csr_softmax_aggregate backward",
                 [&](auto zero) { csr_aggregate::Kernels<decltype(zero)>::stored_backward(a); });
}

void gat_attention_aggregate_forward(const GatAttentionForwardArgs& a) {
  dispatch_float(a.el.dtype(), "gat_attention_aggregate",
                 [&](auto zero) { csr_aggregate::Kernels<decltype(zero)>::gat_forward(a); });
}

void gat_attention_aggregate_backward(const GatAttentionBackwardArgs& a) {
  dispatch_float(a.el.dtype(), "gat_attention_aggregate backward",
                 [&](auto zero) { csr_aggregate::Kernels<decltype(zero)>::gat_backward(a); });
}

void csr_softmax(const CsrSoftmaxArgs& a) {
  dispatch_float(a.edge_scores.dtype(), "csr_softmax",
                 [&](auto zero) { csr_aggregate::Kernels<decltype(zero)>::softmax(a); });
}

void bias_from_partials(const BiasFromPartialsArgs&) {
  GAT_FAIL("bias_from_partials: only CUDA's backward leaves partial sums");
}

}  // namespace cpu_impl

namespace kernels {

void csr_softmax_aggregate_forward(const CsrSoftmaxAggregateForwardArgs& a) {
  GAT_RUN_KERNEL(csr_softmax_aggregate_forward, a, a.node_value);
}

void csr_softmax_aggregate_backward(const CsrSoftmaxAggregateBackwardArgs& a) {
  GAT_RUN_KERNEL(csr_softmax_aggregate_backward, a, a.node_value);
}

void gat_attention_aggregate_forward(const GatAttentionForwardArgs& a) {
  const Tensor &out = *a.out, &lse = *a.lse, &node_value = a.node_value;
  if (a.out_bias.defined()) {
    const char* op = "gat_attention_aggregate (bias)";
    check_compute_dtype(op, "out_bias", a.out_bias, "out", out);
    GAT_CHECK(a.out_bias.numel() == out.size(1) * out.size(2), op, ": out_bias ", a.out_bias.describe(),
              " must hold H F = ", out.size(1) * out.size(2), " values");
  }
  if (a.pos_out || a.pos_weight) {
    const char* op = "gat_attention_aggregate (positive sums)";
    GAT_CHECK(a.pos_out && a.pos_weight, op, ": pos_out and pos_weight are asked for together");
    check_shape(op, "pos_out", *a.pos_out, out.shape());
    check_same(op, "pos_out", *a.pos_out, "out", out);
    check_shape(op, "pos_weight", *a.pos_weight, lse.shape());
    check_same(op, "pos_weight", *a.pos_weight, "lse", lse);
  }
  if (a.source_rows.defined()) {
    const char* op = "gat_attention_aggregate (source rows)";
    GAT_CHECK(node_value.is_cuda(), op, ": packed source rows are read by the CUDA kernels only");
    GAT_CHECK(packs_source_row(node_value.size(1), node_value.size(2),
                               static_cast<int64_t>(dtype_size(node_value.dtype())),
                               static_cast<int64_t>(dtype_size(a.el.dtype()))),
              op, ": node_value ", node_value.describe(), " and el ", a.el.describe(),
              " do not fit a row of ", kPackedRow);
    check_same(op, "source_rows", a.source_rows, "node_value", node_value);
    check_shape(op, "source_rows", a.source_rows, {node_value.size(0), kPackedRow});
  }
  GAT_RUN_KERNEL(gat_attention_aggregate_forward, a, node_value);
}

void gat_attention_aggregate_backward(const GatAttentionBackwardArgs& a) {
  const OutputActivation& activation = a.activation;
  const Tensor& out = a.out;
  if (activation.elu) {
    const char* op = "gat_attention_aggregate backward (activation)";
    GAT_CHECK(a.grad_pre, op, ": grad_pre, the gradient of the activation's input, is needed");
    check_same(op, "grad_pre", *a.grad_pre, "out", out);
    check_shape(op, "grad_pre", *a.grad_pre, out.shape());
  }
  const int64_t N = out.size(0), HF = out.size(1) * out.size(2);
  if (a.grad_bias) {
    const char* op = "gat_attention_aggregate backward (d bias)";
    check_compute_dtype(op, "grad_bias", *a.grad_bias, "out", out);
    GAT_CHECK(a.grad_bias->numel() == HF, op, ": grad_bias ", a.grad_bias->describe(),
              " must hold H F = ", HF, " values");
  }
  // d bias: the column sums of the gradient of out + out_bias, in double (sum_axis), where the
  // kernels do not take them in their own pass.
  const Tensor& grad_in = activation.elu ? *a.grad_pre : a.grad_out;
  auto sum_bias = [&] {  // (a bf16 gradient widened first: d bias is f32)
    if (!a.grad_bias) return;
    sum_axis(grad_in.dtype() == a.grad_bias->dtype() ? grad_in : grad_in.to(a.grad_bias->dtype()), 1, N, HF,
             *a.grad_bias);
  };
  if (a.graph->num_edges() == 0 || a.el.size(1) == 0 || a.node_value.size(2) == 0) {
    // Nothing is aggregated: every gradient but the activation's and the bias's is zero (and
    // the kernels may assume edges, heads and features).
    KeepMask drawn;
    if (activation.elu)
      elu_dropout_backward(out, a.grad_out, activation.alpha, activation.dropout, activation.keep_scale(),
                           activation_keep(activation, out, a.kept, drawn), *a.grad_pre);
    sum_bias();
    for (Tensor* grad : {a.grad_el, a.grad_er, a.grad_edge_term, a.grad_value})
      if (grad) grad->zero_();
    return;
  }
  bool bias_taken = false;
  GatAttentionBackwardArgs impl = a;
  impl.bias_taken = &bias_taken;
  GAT_RUN_KERNEL(gat_attention_aggregate_backward, impl, a.node_value);
  if (!bias_taken) sum_bias();
}

void bias_from_partials(const BiasFromPartialsArgs& a) { GAT_RUN_KERNEL(bias_from_partials, a, a.partials); }

void csr_softmax(const CsrSoftmaxArgs& a) { GAT_RUN_KERNEL(csr_softmax, a, a.edge_scores); }

}  // namespace kernels

Tensor csr_softmax_aggregate(const Graph& graph, const Tensor& edge_scores, const Tensor& node_value,
                             const DropoutKey& attn_dropout) {
  const char* op = "csr_softmax_aggregate";
  if (bf16_through_f32(op, node_value, edge_scores, node_value))
    return detail::rounded_to_bf16(csr_softmax_aggregate(graph, detail::widened(edge_scores),
                                                         detail::widened(node_value), attn_dropout));
  const int64_t H = check_scores(op, graph, edge_scores);
  check_same(op, "edge_scores", edge_scores, "node_value", node_value);
  check_dim(op, "node_value", node_value, 3);
  GAT_CHECK(node_value.size(0) == graph.num_src_nodes() && node_value.size(1) == H, op, ": 'node_value' ",
            node_value.describe(), " must be (Ns, H, F) with Ns = ", graph.num_src_nodes(),
            " sources and H = ", H, " heads of 'edge_scores' ", edge_scores.describe());
  check_dropout(op, attn_dropout);

  const int64_t N = graph.num_dst_nodes(), F = node_value.size(2);
  Tensor out = Tensor::empty({N, H, F}, node_value.dtype(), node_value.device(), op);
  Tensor lse = Tensor::empty({N, H}, compute_dtype(node_value.dtype()), node_value.device(),
                             "csr_softmax_aggregate lse");
  CsrSoftmaxAggregateForwardArgs forward{{&graph, edge_scores, node_value, attn_dropout}};
  forward.out = &out;
  forward.lse = &lse;
  kernels::csr_softmax_aggregate_forward(forward);

  const bool need_scores = edge_scores.requires_grad(), need_value = node_value.requires_grad();
  return autograd::record(op, out, {edge_scores, node_value},
                          [graph, s = edge_scores.detach(), v = node_value.detach(), lse, attn_dropout,
                           need_scores, need_value](const Tensor& grad_out) {
                            check_same("csr_softmax_aggregate backward", "grad_out", grad_out, "node_value",
                                       v);
                            check_shape("csr_softmax_aggregate backward", "grad_out", grad_out,
                                        {graph.num_dst_nodes(), v.size(1), v.size(2)});
                            Tensor ds, dv;
                            if (need_scores)
                              ds = Tensor::empty(s.shape(), s.dtype(), s.device(), "d edge_scores");
                            if (need_value)
                              dv = Tensor::empty(v.shape(), v.dtype(), v.device(), "d node_value");
                            CsrSoftmaxAggregateBackwardArgs backward{{&graph, s, v, attn_dropout}};
                            backward.lse = lse;
                            backward.grad_out = grad_out;
                            backward.grad_scores = need_scores ? &ds : nullptr;
                            backward.grad_value = need_value ? &dv : nullptr;
                            kernels::csr_softmax_aggregate_backward(backward);
                            return std::vector<Tensor>{ds, dv};
                          });
}

namespace {

// gat_attention_aggregate's forward and backward around its kernels, shared with
// gat_projected_attention, which makes el, er and the values itself. Every tensor is detached:
// a closure holds them.
struct GatSaved {
  Graph graph;
  Tensor el, er, edge_term, value, out, bias, lse, pos_out, pos_weight;
  double negative_slope = 0.0;
  DropoutKey attn_dropout;
  OutputActivation activation;
  std::shared_ptr<KeptDecisions> kept;  // CPU, or null
  Tensor out_low;                       // bf16 rows in training (CUDA), or undefined
};
struct GatGrads {
  Tensor el, er, edge_term, value, bias;
};

// The projection entries' node input t (wh or x): floating point, of `dim` dimensions, a row per
// node of the graph (one node set: its sources are its destinations).
void check_node_rows(const char* op, const char* name, const Tensor& t, int64_t dim, const Graph& graph) {
  check_attention_float(op, name, t);
  check_dim(op, name, t, dim);
  GAT_CHECK(graph.num_src_nodes() == t.size(0) && graph.num_dst_nodes() == t.size(0), op, ": '", name, "' ",
            t.describe(), " must have a row per node of the graph (", graph.num_src_nodes(), " sources, ",
            graph.num_dst_nodes(), " destinations)");
}

void check_gat_aggregate(const char* op, const Graph& graph, const Tensor& el, const Tensor& er,
                         const Tensor& node_value, double negative_slope, const DropoutKey& attn_dropout,
                         const Tensor& edge_term, const Tensor& bias, const OutputActivation& activation) {
  // el and er are per-node statistics, kept in the dtype the rows compute in (f32 beside bf16
  // rows, as lse is: docs/precision.md); the edge term is per edge, in the rows' dtype.
  check_gat_score_terms(op, graph, el, er, Tensor());
  check_compute_dtype(op, "el", el, "node_value", node_value);
  check_dim(op, "node_value", node_value, 3);
  const int64_t H = el.size(1), F = node_value.size(2);
  if (edge_term.defined()) {
    check_same(op, "edge_term", edge_term, "node_value", node_value);
    check_shape(op, "edge_term", edge_term, {graph.num_edges(), H});
  }
  GAT_CHECK(node_value.size(0) == graph.num_src_nodes() && node_value.size(1) == H, op, ": 'node_value' ",
            node_value.describe(), " must be (Ns, H, F) with Ns = ", graph.num_src_nodes(),
            " sources of the graph and H = ", H, " heads of 'el' ", el.describe());
  if (bias.defined()) {
    check_compute_dtype(op, "bias", bias, "node_value", node_value);
    const bool heads_by_features = bias.shape() == Shape{H, F}, flat = bias.shape() == Shape{H * F};
    GAT_CHECK(heads_by_features || flat, op, ": 'bias' ", bias.describe(),
              " must be (H, F) or (H F) for H = ", H, " heads of F = ", F, " features");
  }
  GAT_CHECK(std::isfinite(negative_slope), op, ": negative_slope ", negative_slope, " is not finite");
  check_dropout(op, attn_dropout);
  if (activation.elu) {
    GAT_CHECK(activation.alpha >= 0.0 && std::isfinite(activation.alpha), op,
              ": the output activation's alpha ", activation.alpha,
              " is negative or not finite; its gradient is taken from the output, which needs alpha >= 0");
    check_dropout(op, activation.dropout);
  }
}

// The forward kernels, which add the bias (and apply the activation) as they write out: out is
// then the tensor returned and the one kept. keep_positive: CUDA's positive sums for d er (the header); the
// CPU backward, the reference the CUDA tests compare against, sums d er over the edges, and evaluation needs
// no gradient. source_rows: node_value and el packed for the CUDA forward, or undefined. need_grad:
// the op's backward will run (the CPU then keeps its dropout decisions for it; bf16 rows, which
// only CUDA takes here, then keep out's rounding error, out_low). Returns out, not
// detached (the op records it); the saved tensors in `saved`.
Tensor gat_forward(const char* op, const Graph& graph, const Tensor& el, const Tensor& er,
                   const Tensor& node_value, double negative_slope, const DropoutKey& attn_dropout,
                   const Tensor& edge_term, const Tensor& bias, const OutputActivation& activation,
                   bool keep_positive, bool need_grad, GatSaved& saved,
                   const Tensor& source_rows = Tensor()) {
  const int64_t Nd = graph.num_dst_nodes(), H = el.size(1), F = node_value.size(2);
  const DType stats = compute_dtype(node_value.dtype());  // of lse and pos_weight: f32 for bf16 values
  Tensor out = Tensor::empty({Nd, H, F}, node_value.dtype(), node_value.device(), op);
  Tensor lse = Tensor::empty({Nd, H}, stats, node_value.device(), "gat_attention_aggregate lse");
  Tensor pos_out, pos_weight;
  if (keep_positive) {
    pos_out =
        Tensor::empty({Nd, H, F}, node_value.dtype(), node_value.device(), "gat_attention_aggregate pos_out");
    pos_weight = Tensor::empty({Nd, H}, stats, node_value.device(), "gat_attention_aggregate pos_weight");
  }
  GatAttentionForwardArgs forward{
      {&graph, el, er, edge_term, node_value, negative_slope, attn_dropout, bias, activation}};
  forward.out = &out;
  forward.lse = &lse;
  forward.pos_out = keep_positive ? &pos_out : nullptr;
  forward.pos_weight = keep_positive ? &pos_weight : nullptr;
  forward.source_rows = source_rows;
  Tensor out_low;
  if (need_grad && node_value.dtype() == DType::bf16) {
    out_low = Tensor::empty({Nd, H, F}, DType::bf16, node_value.device(), "gat_attention_aggregate out_low");
    forward.out_low = &out_low;
  }
  auto kept = need_grad && !node_value.is_cuda() ? std::make_shared<KeptDecisions>() : nullptr;
  forward.kept = kept.get();
  kernels::gat_attention_aggregate_forward(forward);
  auto detached = [](const Tensor& t) { return t.defined() ? t.detach() : Tensor(); };
  saved = {graph,          el.detach(), er.detach(), detached(edge_term), node_value.detach(), out.detach(),
           detached(bias), lse,         pos_out,     pos_weight,          negative_slope,      attn_dropout,
           activation,     kept,        out_low};
  return out;
}

GatGrads gat_backward(const GatSaved& s, const Tensor& grad_out, bool need_el, bool need_er, bool need_term,
                      bool need_value, bool need_bias) {
  const char* op = "gat_attention_aggregate backward";
  check_same(op, "grad_out", grad_out, "node_value", s.value);
  check_shape(op, "grad_out", grad_out, s.out.shape());
  GatGrads d;
  // d el and d er take the storage of pos_weight and lse where they have their shape (CUDA's
  // training forward keeps pos_weight): the backward reads pos_weight[i,h] and lse[i,h] (or, when a
  // head is wider than a group of lanes, lse in full) before it writes d er[i,h] or any d el, and
  // nothing else holds them. 64 MB less at the peak of GATConv's 1M-node backward.
  auto reuse = [](const Tensor& saved, const Tensor& like, const char* name) {
    return saved.defined() && saved.shape() == like.shape() && saved.dtype() == like.dtype()
               ? saved
               : Tensor::empty(like.shape(), like.dtype(), like.device(), name);
  };
  const bool positive_sums = s.pos_weight.defined();
  if (need_el) d.el = reuse(positive_sums ? s.pos_weight : Tensor(), s.el, "d el");
  if (need_er) d.er = reuse(positive_sums ? s.lse : Tensor(), s.er, "d er");
  if (need_term)
    d.edge_term =
        Tensor::empty(s.edge_term.shape(), s.edge_term.dtype(), s.edge_term.device(), "d edge_term");
  // d node_value takes the positive sums' storage where it has their shape: the backward reads
  // them (for d er) before it writes d node_value, and nothing else holds them.
  if (need_value) d.value = reuse(s.pos_out, s.value, "d node_value");
  // The gradient of out + bias, before the activation (grad_out itself without one).
  // It takes out_low's storage where there is one: the backward reads out_low[n] before it writes
  // grad_pre[n], in the same thread, and reads it nowhere else.
  Tensor grad_pre = s.activation.elu ? reuse(s.out_low, s.out, "d activation input") : grad_out;
  if (need_bias) d.bias = Tensor::empty(s.bias.shape(), s.bias.dtype(), s.bias.device(), "d bias");
  Tensor bias_partials;
  GatAttentionBackwardArgs backward{{&s.graph, s.el, s.er, s.edge_term, s.value, s.negative_slope,
                                     s.attn_dropout, s.bias, s.activation, s.kept.get()}};
  backward.out = s.out;
  backward.lse = s.lse;
  backward.pos_out = s.pos_out;
  backward.pos_weight = s.pos_weight;
  backward.out_low = s.out_low;
  backward.grad_out = grad_out;
  backward.grad_el = need_el ? &d.el : nullptr;
  backward.grad_er = need_er ? &d.er : nullptr;
  backward.grad_edge_term = need_term ? &d.edge_term : nullptr;
  backward.grad_value = need_value ? &d.value : nullptr;
  backward.grad_pre = s.activation.elu ? &grad_pre : nullptr;
  backward.grad_bias = need_bias ? &d.bias : nullptr;
  backward.bias_partials = need_bias ? &bias_partials : nullptr;
  kernels::gat_attention_aggregate_backward(backward);
  if (bias_partials.defined())  // d bias added up from its partial sums beside the rest of the pass
    d.bias = autograd::side_gradients({bias_partials}, [grad_bias = d.bias](const std::vector<Tensor>& in) {
      Tensor out = grad_bias;
      BiasFromPartialsArgs sums;
      sums.partials = in[0];
      sums.grad_bias = &out;
      kernels::bias_from_partials(sums);
      return std::vector<Tensor>{out};
    })[0];
  return d;
}

}  // namespace

Tensor gat_attention_aggregate(const Graph& graph, const Tensor& el, const Tensor& er,
                               const Tensor& node_value, double negative_slope,
                               const DropoutKey& attn_dropout, const Tensor& edge_term, const Tensor& bias,
                               const OutputActivation& activation) {
  const char* op = "gat_attention_aggregate";
  if (bf16_through_f32(op, node_value, el, er, node_value, edge_term, bias))
    return detail::rounded_to_bf16(gat_attention_aggregate(
        graph, detail::widened(el), detail::widened(er), detail::widened(node_value), negative_slope,
        attn_dropout, detail::widened(edge_term), detail::widened(bias), activation));
  // CUDA's bf16 kernels take el and er in f32 (per-node statistics); bf16 ones are widened, exactly,
  // and their gradients rounded back once by the cast's backward.
  if (detail::is_bf16(node_value) && (detail::is_bf16(el) || detail::is_bf16(er)))
    return gat_attention_aggregate(graph, detail::widened(el), detail::widened(er), node_value,
                                   negative_slope, attn_dropout, edge_term, bias, activation);
  check_gat_aggregate(op, graph, el, er, node_value, negative_slope, attn_dropout, edge_term, bias,
                      activation);
  GatSaved saved;
  const Tensor out = gat_forward(op, graph, el, er, node_value, negative_slope, attn_dropout, edge_term, bias,
                                 activation, node_value.is_cuda() && autograd::needs_grad({er}),
                                 autograd::needs_grad({el, er, edge_term, node_value, bias}), saved);
  const bool need_el = el.requires_grad(), need_er = er.requires_grad(),
             need_term = edge_term.defined() && edge_term.requires_grad(),
             need_value = node_value.requires_grad(), need_bias = bias.defined() && bias.requires_grad();
  return autograd::record(
      op, out, {el, er, edge_term, node_value, bias},
      [saved = std::move(saved), need_el, need_er, need_term, need_value, need_bias](const Tensor& grad_out) {
        GatGrads d = gat_backward(saved, grad_out, need_el, need_er, need_term, need_value, need_bias);
        return std::vector<Tensor>{d.el, d.er, d.edge_term, d.value, d.bias};
      });
}

Tensor gat_projected_attention(const Graph& graph, const Tensor& wh, const Tensor& att_src,
                               const Tensor& att_dst, double negative_slope, const DropoutKey& attn_dropout,
                               const DropoutKey& value_dropout, const Tensor& edge_term, const Tensor& bias,
                               const OutputActivation& activation) {
  const char* op = "gat_projected_attention";
  // bf16 wh on CUDA beside f32 parameters takes the op's own kernels (docs/precision.md); the
  // CPU, the reference, computes bf16 in f32.
  const bool native = bf16_rows_on_cuda(wh, att_src, att_dst, bias) &&
                      (!edge_term.defined() || edge_term.dtype() == DType::bf16);
  if (!native && detail::bf16_in_f32(op, wh, att_src, att_dst, edge_term, bias))
    return detail::rounded_to_bf16(gat_projected_attention(
        graph, detail::widened(wh), detail::widened(att_src), detail::widened(att_dst), negative_slope,
        attn_dropout, value_dropout, detail::widened(edge_term), detail::widened(bias), activation));
  check_node_rows(op, "wh", wh, 3, graph);
  const int64_t N = wh.size(0), H = wh.size(1), F = wh.size(2);
  check_compute_dtype(op, "att_src", att_src, "wh", wh);
  check_shape(op, "att_src", att_src, {H, F});
  check_compute_dtype(op, "att_dst", att_dst, "wh", wh);
  check_shape(op, "att_dst", att_dst, {H, F});
  check_dropout(op, value_dropout);
  // el and er in the dtype the rows compute in: f32 beside bf16 wh (per-node statistics).
  const DType stats = compute_dtype(wh.dtype());
  Tensor el = Tensor::empty({N, H}, stats, wh.device(), "gat_projected_attention el");
  Tensor er = Tensor::empty({N, H}, stats, wh.device(), "gat_projected_attention er");
  // Every input checked before any kernel runs (the values have wh's shape).
  check_gat_aggregate(op, graph, el, er, wh, negative_slope, attn_dropout, edge_term, bias, activation);

  // el, er and the values in one pass over wh; on CUDA, when a node's values and el fit a packed
  // row (the output layer), also those rows, which the forward reads instead of the two tensors
  // (dropped with the forward; the backward reads a source's own row once). A bf16 row holds el
  // in f32 after its values.
  Tensor values = value_dropout.active()
                      ? Tensor::empty(wh.shape(), wh.dtype(), wh.device(), "gat_projected_attention values")
                      : wh;
  Tensor rows = wh.is_cuda() && packs_source_row(H, F, static_cast<int64_t>(dtype_size(wh.dtype())),
                                                 static_cast<int64_t>(dtype_size(stats)))
                    ? Tensor::empty({N, int64_t{kPackedRow}}, wh.dtype(), wh.device(),
                                    "gat_projected_attention source rows")
                    : Tensor();
  auto kept = std::make_shared<KeepMask>();
  const double keep_scale = dropout_keep_scale(value_dropout);
  kernels::head_dot_pair_dropout_forward(wh, att_src, att_dst, value_dropout, keep_scale, *kept, el, er,
                                         value_dropout.active() ? &values : nullptr,
                                         rows.defined() ? &rows : nullptr);
  const bool need_wh = wh.requires_grad(), need_src = att_src.requires_grad(),
             need_dst = att_dst.requires_grad(), need_term = edge_term.defined() && edge_term.requires_grad(),
             need_bias = bias.defined() && bias.requires_grad();
  GatSaved saved;
  const Tensor out = gat_forward(op, graph, el, er, values, negative_slope, attn_dropout, edge_term, bias,
                                 activation, wh.is_cuda() && autograd::needs_grad({wh, att_dst}),
                                 autograd::needs_grad({wh, att_src, att_dst, edge_term, bias}), saved, rows);
  return autograd::record(
      op, out, {wh, att_src, att_dst, edge_term, bias},
      [saved = std::move(saved), x = need_src || need_dst ? wh.detach() : Tensor(),  // for d att only
       a_src = att_src.detach(), a_dst = att_dst.detach(), value_dropout, keep_scale, kept, need_wh, need_src,
       need_dst, need_term, need_bias](const Tensor& grad_out) {
        GatGrads d = gat_backward(saved, grad_out, need_wh || need_src, need_wh || need_dst, need_term,
                                  need_wh, need_bias);
        // d att_src and d att_dst (sums over the nodes) as side work, queued first: they run
        // beside d wh and what the pass does with it.
        auto d_att = [&](const std::vector<Tensor>& in) {  // in: x, d el, d er, att_src, att_dst
          const Tensor &wh_saved = in[0], &d_el = in[1], &d_er = in[2], &src = in[3], &dst = in[4];
          Tensor d_src, d_dst;
          if (need_src) d_src = Tensor::empty(src.shape(), src.dtype(), src.device(), "d att_src");
          if (need_dst) d_dst = Tensor::empty(dst.shape(), dst.dtype(), dst.device(), "d att_dst");
          if (need_src && need_dst)
            kernels::head_dot_pair_grad_a(wh_saved, d_el, d_er, d_src, d_dst);
          else if (need_src)
            kernels::head_dot_backward(wh_saved, src, d_el, nullptr, &d_src);
          else if (need_dst)
            kernels::head_dot_backward(wh_saved, dst, d_er, nullptr, &d_dst);
          return std::vector<Tensor>{d_src, d_dst};
        };
        const std::vector<Tensor> d_a = need_src || need_dst
                                            ? autograd::side_gradients({x, d.el, d.er, a_src, a_dst}, d_att)
                                            : std::vector<Tensor>(2);
        Tensor dwh;
        if (need_wh) {  // in place over d values
          kernels::head_dot_pair_grad_x(d.value, value_dropout, keep_scale, *kept, a_src, d.el, a_dst, d.er,
                                        d.value);
          dwh = d.value;
        }
        return std::vector<Tensor>{dwh, d_a[0], d_a[1], d.edge_term, d.bias};
      });
}

Tensor gat_linear_attention(const Graph& graph, const Tensor& x, const Tensor& weight, const Tensor& att_src,
                            const Tensor& att_dst, double negative_slope, const DropoutKey& attn_dropout,
                            const DropoutKey& value_dropout, const Tensor& edge_term, const Tensor& bias,
                            const OutputActivation& activation) {
  const char* op = "gat_linear_attention";
  // bf16 x on CUDA beside f32 parameters takes the fused kernels' bf16 instantiation where they
  // take its shapes and no d x is asked (they have no composition in bf16 to fall back to); the
  // CPU, the reference, and every other case compute bf16 in f32.
  const bool native = bf16_rows_on_cuda(x, weight, att_src, att_dst, bias) &&
                      (!edge_term.defined() || edge_term.dtype() == DType::bf16) && !x.requires_grad() &&
                      x.dim() == 2 && att_src.dim() == 2 &&
                      GAT_CUDA_CALL(cuda_impl::linear_head_dot_takes_bf16(x.size(0), x.size(1),
                                                                          att_src.size(0), att_src.size(1)));
  if (!native && detail::bf16_in_f32(op, x, weight, att_src, att_dst, edge_term, bias))
    return detail::rounded_to_bf16(
        gat_linear_attention(graph, detail::widened(x), detail::widened(weight), detail::widened(att_src),
                             detail::widened(att_dst), negative_slope, attn_dropout, value_dropout,
                             detail::widened(edge_term), detail::widened(bias), activation));
  check_node_rows(op, "x", x, 2, graph);
  check_compute_dtype(op, "weight", weight, "x", x);
  check_dim(op, "weight", weight, 2);
  check_compute_dtype(op, "att_src", att_src, "x", x);
  check_dim(op, "att_src", att_src, 2);
  const int64_t N = x.size(0), K = x.size(1), H = att_src.size(0), F = att_src.size(1);
  GAT_CHECK(weight.size(0) == K && weight.size(1) == H * F, op, ": 'weight' ", weight.describe(),
            " must be (K, H F) = (", K, ", ", H * F, ") for 'x' ", x.describe(), " and 'att_src' ",
            att_src.describe());
  check_compute_dtype(op, "att_dst", att_dst, "x", x);
  check_shape(op, "att_dst", att_dst, {H, F});
  check_dropout(op, value_dropout);
  // el and er in the dtype the rows compute in: f32 beside bf16 x (per-node statistics).
  const DType stats = compute_dtype(x.dtype());
  Tensor el = Tensor::empty({N, H}, stats, x.device(), "gat_linear_attention el");
  Tensor er = Tensor::empty({N, H}, stats, x.device(), "gat_linear_attention er");
  Tensor values = Tensor::empty({N, H, F}, x.dtype(), x.device(), "gat_linear_attention values");
  check_gat_aggregate(op, graph, el, er, values, negative_slope, attn_dropout, edge_term, bias, activation);

  // The value dropout's decisions: the CPU's, and CUDA's fused kernel's as bits (N H F / 8 bytes),
  // which its backward reads instead of drawing them again.
  auto kept = std::make_shared<KeepMask>();
  const double keep_scale = dropout_keep_scale(value_dropout);
  Tensor keep_bits =
      x.is_cuda() && value_dropout.active()
          ? Tensor::empty({N, (H * F + 31) / 32}, DType::i32, x.device(), "gat_linear_attention keep bits")
          : Tensor();
  kernels::linear_head_dot_pair_dropout_forward(x, weight, att_src, att_dst, value_dropout, keep_scale, *kept,
                                                values, el, er, keep_bits.defined() ? &keep_bits : nullptr);
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad(), need_src = att_src.requires_grad(),
             need_dst = att_dst.requires_grad(), need_term = edge_term.defined() && edge_term.requires_grad(),
             need_bias = bias.defined() && bias.requires_grad();
  GatSaved saved;
  const Tensor out = gat_forward(op, graph, el, er, values, negative_slope, attn_dropout, edge_term, bias,
                                 activation, x.is_cuda() && autograd::needs_grad({x, weight, att_dst}),
                                 autograd::needs_grad({x, weight, att_src, att_dst, edge_term, bias}), saved);
  return autograd::record(
      op, out, {x, weight, att_src, att_dst, edge_term, bias},
      [saved = std::move(saved), x = x.detach(), w = weight.detach(), a_src = att_src.detach(),
       a_dst = att_dst.detach(), value_dropout, keep_scale, kept, keep_bits, need_x, need_w, need_src,
       need_dst, need_term, need_bias](const Tensor& grad_out) {
        const bool need_terms = need_x || need_w || need_src || need_dst, need_values = need_x || need_w;
        GatGrads d = gat_backward(saved, grad_out, need_terms, need_terms, need_term, need_values, need_bias);
        auto like = [](bool need, const Tensor& t, const char* name) {
          return need ? Tensor::empty(t.shape(), t.dtype(), t.device(), name) : Tensor();
        };
        // bf16 x takes the fused backward alone, which writes d weight and both d att: those not
        // asked for are written to scratch.
        const bool fused_only = x.dtype() == DType::bf16;
        Tensor dx = like(need_x, x, "d x"), dw = like(need_w || fused_only, w, "d weight"),
               d_src = like(need_src || fused_only, a_src, "d att_src"),
               d_dst = like(need_dst || fused_only, a_dst, "d att_dst");
        if (need_terms)
          kernels::linear_head_dot_pair_backward(
              x, w, a_src, a_dst, value_dropout, keep_scale, *kept, keep_bits, d.value, d.el, d.er,
              need_x ? &dx : nullptr, dw.defined() ? &dw : nullptr, d_src.defined() ? &d_src : nullptr,
              d_dst.defined() ? &d_dst : nullptr);
        auto asked = [](bool need, const Tensor& t) { return need ? t : Tensor(); };
        return std::vector<Tensor>{
            dx, asked(need_w, dw), asked(need_src, d_src), asked(need_dst, d_dst), d.edge_term, d.bias};
      });
}

Tensor csr_softmax(const Graph& graph, const Tensor& edge_scores) {
  check_scores("csr_softmax", graph, edge_scores);
  Tensor weights =
      Tensor::empty(edge_scores.shape(), edge_scores.dtype(), edge_scores.device(), "csr_softmax");
  CsrSoftmaxArgs softmax;
  softmax.graph = &graph;
  softmax.edge_scores = edge_scores;
  softmax.weights = &weights;
  kernels::csr_softmax(softmax);
  return weights;
}

}  // namespace gat::ops
