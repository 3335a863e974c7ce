// GATConv: the graph attention layer of Velickovic et al. (2018) with PyTorch Geometric's
// GATConv options and initialisation.
//
//   Wh_s = x_src W_src viewed (Ns, H, F),  Wh_d = x_dst W_dst viewed (Nd, H, F)
//          (one graph, one x: x_src = x_dst = x and W_src = W_dst = W, Wh computed once)
//   el  = Wh_s . att_src (Ns, H),  er = Wh_d . att_dst (Nd, H)
//         (computed as x_src (W_src . att_src) when in_channels < H*F: one GEMM with the
//         folded (in, H) weight, which reads x rather than Wh and keeps no Wh for its backward)
//   ee  = edge_attr We . att_edge  (with edge_dim; We viewed (D, H, F))  (E, H)
//   s   = LeakyReLU(el[src(e)] + er[dst(e)] (+ ee[e]), negative_slope)  (E, H), never stored
//   out = softmax over each destination's incoming edges of s, attention dropout, weighted sum
//         of Wh_s (gat_attention_aggregate: s computed inside the kernels)  (Nd, H, F)
//   out = concat ? out viewed (Nd, H*F) : mean over heads (Nd, F);  + residual(x_dst);  + bias
//         (ops::head_mean averages the heads and adds the bias in one kernel when there is no residual;
//         concatenated heads, or one head, without a residual take the bias inside the aggregate)
//
// Bipartite input as PyG's GATConv: with dst_in_channels > 0 (PyG's in_channels = (src, dst))
// the layer has lin_src and lin_dst instead of lin; forward(x_src, x_dst, graph) takes the
// sources' and the destinations' features of a graph of Ns sources and Nd destinations (with lin
// alone both go through lin; one x with lin_src and lin_dst goes through both).
//
// With add_self_loops the layer runs on graph.with_self_loops() (existing loops removed, then
// (i, i) for every i < min(Ns, Nd): every node of a graph on one node set; SelfLoopedGraph: the
// input graph itself when it already has them, else a looped copy kept). With edge_dim,
// edge_attr (E, edge_dim) follows the input graph's edge order (edge_attr_in_graph_order in
// graph.h puts per-input-edge rows there); with add_self_loops the loops' attributes are made by
// fill_value from the other edges' (PyG's remove_self_loops then add_self_loops: existing loops'
// attributes are discarded; ops::self_loop_attr). The edge term is computed as edge_attr times the
// (edge_dim, H) matrix We . att_edge, never as an E x H*F projection. Everything goes through ops,
// so the layer runs unchanged on CPU and CUDA. Parameter names follow PyG: lin.weight or
// lin_src.weight and lin_dst.weight (stored (in, H*F), the transpose of PyG's), att_src and
// att_dst (H, F) (PyG: (1, H, F)), bias, res.weight, lin_edge.weight (edge_dim, H*F) and
// att_edge (H, F).
#pragma once

#include <cstdint>
#include <memory>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"
#include "gat/layers/graph_attention.h"
#include "gat/layers/linear.h"

namespace gat {

// dst_in_channels > 0 gives the layer lin_src and lin_dst instead of lin.
struct GATConvOptions : GraphAttentionOptions {
  // Dropout on the input features (training mode only), as a Dropout layer before this one: x,
  // or x_src and then x_dst, each drawn before the layer's other dropouts. Sparse x through lin
  // takes it inside the projection's kernel (ops::sparse_dropout_matmul) where nothing else reads
  // x (no residual); otherwise x is dropped first.
  double input_dropout = 0.0;
  // Dropout on Wh where it is aggregated (not where el, er are computed), as the GAT authors'
  // implementation does (its attn_head drops seq_fts with in_drop); PyG's GATConv has none (0).
  double value_dropout = 0.0;
  // The output through ELU (alpha elu_alpha) and then dropout at output_dropout (training mode
  // only), as the GAT paper's first layer feeds its second: DGL's activation, plus the next
  // layer's input dropout. Inside the aggregate's kernels (ops::OutputActivation) when the bias is
  // (concatenated heads or one head, no residual); as ops::elu_dropout after the layer otherwise.
  bool elu = false;
  double elu_alpha = 1.0;
  double output_dropout = 0.0;  // needs elu
};

class GATConv : public GraphAttentionLayer {
 public:
  // `init` draws lin.weight (or lin_src.weight, lin_dst.weight), lin_edge.weight, att_src,
  // att_dst, att_edge and res.weight (glorot), in that order (PyG's, but for res); bias = 0.
  GATConv(const GATConvOptions& options, Generator& init);

  // forward(x, graph, [edge_attr,] gen, [attention]) and forward(x_src, x_dst, graph,
  // [edge_attr,] gen, [attention]): GraphAttentionLayer (graph_attention.h). x or x_src may be
  // sparse (the projections then use ops::sparse_matmul).

  const GATConvOptions& options() const { return options_; }
  int64_t out_features() const;  // H*F if concat else F

  std::shared_ptr<Linear> lin;       // (in, H*F), no bias; null when bipartite
  std::shared_ptr<Linear> lin_src;   // (in_channels, H*F), no bias; null unless bipartite
  std::shared_ptr<Linear> lin_dst;   // (dst_in_channels, H*F), no bias; null unless bipartite
  Tensor att_src;                    // (H, F)
  Tensor att_dst;                    // (H, F)
  Tensor bias;                       // (out_features,), undefined without bias
  std::shared_ptr<Linear> res;       // (dst in, out_features), no bias; null without residual
  std::shared_ptr<Linear> lin_edge;  // (edge_dim, H*F), no bias; null without edge_dim
  Tensor att_edge;                   // (H, F), undefined without edge_dim

 private:
  Tensor forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                       const Tensor& edge_attr, Generator& gen, Attention* attention) override;
  // el or er (rows, H) = (x proj.weight viewed (rows, H, F)) . att; wh is that projection viewed
  // (rows, H, F) where the caller has it, else undefined; see attention_term in gat_conv.cpp.
  Tensor attention_term(const Linear& proj, const Features& x, const Tensor& wh, const Tensor& att) const;
  // Whether attention_term reads el or er from proj's output (in >= H*F) rather than through the
  // folded weight.
  bool terms_from_projection(const Linear& proj) const;
  // ee (E', H) over g's edges (g: graph, looped when add_self_loops), or undefined without
  // edge_dim.
  Tensor edge_scores(const Graph& graph, const Graph& g, const Tensor& edge_attr);

  GATConvOptions options_;
  SelfLoopedGraph looped_;  // with add_self_loops: the graph the layer runs on
};

}  // namespace gat
