// CUDA entry point of csr_softmax_aggregate's backward, in a file of its own so that it compiles
// beside the forward (framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh).
#include "gat/framework/ops/attention/detail/csr_softmax_aggregate_kernels.cuh"

namespace gat::ops::cuda_impl {

using namespace csr_aggregate;

void csr_softmax_aggregate_backward(const CsrSoftmaxAggregateBackwardArgs& args) {
  const Graph& graph = *args.graph;
  const Tensor &edge_scores = args.edge_scores, &node_value = args.node_value, &lse = args.lse,
               &grad_out = args.grad_out;
  const DropoutKey& attn_dropout = args.attn_dropout;
  Tensor *grad_scores = args.grad_scores, *grad_value = args.grad_value;
  const long long N = graph.num_dst_nodes(), E = graph.num_edges();
  const int H = static_cast<int>(edge_scores.size(1)), F = static_cast<int>(node_value.size(2));
  const bool need_scores = grad_scores && E * H > 0,
             need_value = grad_value && graph.num_src_nodes() * H * F > 0;
  if (F == 0) {  // no features: the scores do not matter
    if (need_scores) grad_scores->zero_();
    return;
  }
  if (!need_scores && !need_value) return;
  dispatch_rows(edge_scores.dtype(), "csr_softmax_aggregate backward", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    BackwardArgs<S> a =
        backward_args<S>(graph, node_value, grad_out, need_value ? grad_value : nullptr, H, attn_dropout);
    S* ds = need_scores ? grad_scores->data<S>() : nullptr;  // (E, H)
    with_gather_vec<S>(graph.num_src_nodes(), H, F, {a.V, a.grad_out, a.dV}, [&](auto vec) {
      constexpr int VEC = decltype(vec)::value;
      const Tiling tiling(F, VEC);  // of one head
      a.tiles = tiling.tiles;
      // da parts: straight into ds when a head is one tile and ds is of the compute type, else
      // one (E, H) slice per tile (bf16 ds: da in f32 until ds is rounded once).
      constexpr bool kDaInDs = std::is_same_v<S, T>;
      Tensor da_parts;
      if (need_scores && (tiling.tiles > 1 || !kDaInDs))
        da_parts = Tensor::empty({tiling.tiles, E, H}, dtype_of<T>::value, Device::cuda, "d attention parts");
      T* da = nullptr;
      if (da_parts.defined())
        da = da_parts.data<T>();
      else if constexpr (kDaInDs)
        da = ds;
      with_group(tiling.G, [&](auto group) {
        walk_transposed<S, VEC, decltype(group)::value>(
            graph, a, ScoreGrad<S>{edge_scores.data<S>(), lse.data<T>(), da});
      });
      if (!need_scores) return;
      row_softmax_grad_kernel<S>
          <<<warps::warp_blocks(N * warps::HeadLanes(H).blocks), kThreads, 0, cuda::stream()>>>(
              graph.row_ptr().data<int32_t>(), edge_scores.data<S>(), lse.data<T>(), da, ds, N, E, H,
              tiling.tiles);
      CUDA_CHECK_LAUNCH("row_softmax_grad_kernel");
    });
  });
}

}  // namespace gat::ops::cuda_impl
