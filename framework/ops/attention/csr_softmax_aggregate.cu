// CUDA entry points of csr_softmax_aggregate and GAT's fused attention (which run the code
// compiled apart for each dtype), bias_from_partials and csr_softmax. The kernels are in
// framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh.
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl {

using namespace csr_aggregate;

void csr_softmax_aggregate_forward(const CsrSoftmaxAggregateForwardArgs& args) {
  dispatch_rows(args.edge_scores.dtype(), "csr_softmax_aggregate",
                [&](auto zero) { stored_forward<decltype(zero)>(args); });
}

void csr_softmax_aggregate_backward(const CsrSoftmaxAggregateBackwardArgs& args) {
  dispatch_rows(args.edge_scores.dtype(), "csr_softmax_aggregate backward",
                [&](auto zero) { stored_backward<decltype(zero)>(args); });
}

void gat_attention_aggregate_forward(const GatAttentionForwardArgs& args) {
  // On the rows' dtype: beside bf16 rows el and er are f32 (GatScores).
  dispatch_rows(args.node_value.dtype(), "gat_attention_aggregate", [&](auto zero) {
    with_edge_term(args.edge_term,
                   [&](auto term) { gat_forward<decltype(zero), decltype(term)::value>(args); });
  });
}

void gat_attention_aggregate_backward(const GatAttentionBackwardArgs& args) {
  bool bias_written = false;
  dispatch_rows(args.node_value.dtype(), "gat_attention_aggregate backward",
                [&](auto zero) { bias_written = gat_backward<decltype(zero)>(args); });
  if (args.bias_taken) *args.bias_taken = bias_written;
}

void bias_from_partials(const BiasFromPartialsArgs& args) {
  const Tensor& partials = args.partials;
  Tensor& grad_bias = *args.grad_bias;
  check_shape("bias_from_partials", "partials", partials, {partials.size(0), grad_bias.numel()});
  dispatch_float(grad_bias.dtype(), "bias_from_partials", [&](auto zero) {
    using T = decltype(zero);
    detail::ordered_column_sums<double, double, T>("head_rows_dot bias sums", partials.data<double>(),
                                                   partials.size(0), grad_bias.numel(), 1,
                                                   grad_bias.data<T>());
  });
}

void csr_softmax(const CsrSoftmaxArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor& edge_scores = args.edge_scores;
  Tensor& weights = *args.weights;
  const long long NH = graph.num_dst_nodes() * edge_scores.size(1);
  if (NH == 0 || graph.num_edges() == 0) return;
  dispatch_float(edge_scores.dtype(), "csr_softmax", [&](auto zero) {
    using T = decltype(zero);
    const int H = static_cast<int>(edge_scores.size(1));
    row_softmax_kernel<T><<<warps::warp_blocks(NH), kThreads, 0, cuda::stream()>>>(
        graph.row_ptr().data<int32_t>(), graph.edge_src().data<int32_t>(),
        StoredScores<T>{edge_scores.data<T>(), H}, weights.data<T>(), nullptr, NH, H);
    CUDA_CHECK_LAUNCH("row_softmax_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
