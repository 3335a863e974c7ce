// GATv2Conv: the graph attention layer of Brody et al. (2022), "How Attentive are Graph Attention
// Networks?", with PyTorch Geometric's GATv2Conv options, parameter names and initialisation.
//
//   xl  = x_src W_l + b_l  (Ns, H, F),  xr = x_dst W_r + b_r  (Nd, H, F)
//         (one graph, one x: x_src = x_dst = x; xr = xl with share_weights)
//   xe  = edge_attr W_e viewed (E, H, F)   (with edge_dim; PyG's lin_edge(edge_attr))
//   s   = att . LeakyReLU(xl[src(e)] + xr[dst(e)] (+ xe[e]), negative_slope)   (E, H), never stored
//   out = softmax over each destination's incoming edges of s, attention dropout, weighted sum of
//         xl[src(e)] (ops::gatv2_attention_aggregate: nothing of size E x H x F is built)
//         (Nd, H, F)
//   out = concat ? out viewed (Nd, H*F) : mean over heads (Nd, F);  + residual(x_dst);  + bias
//
// Unlike GAT's, the score is not a sum of a source and a destination term: the LeakyReLU acts
// on the sum of the two projected rows, so the ranking of a node's neighbours depends on the node.
//
// Bipartite input as PyG's GATv2Conv: with dst_in_channels > 0 (PyG's in_channels = (src, dst))
// lin_r and res take x_dst's dst_in_channels; forward(x_src, x_dst, graph) takes the sources' and
// the destinations' features of a graph of Ns sources and Nd destinations: lin_l projects x_src,
// lin_r x_dst (both lin_l with share_weights, which needs dst_in_channels equal to in_channels or
// 0: PyG's shared lin_l cannot take an x_dst of another width), and the residual is x_dst's. A
// layer of one width takes a pair too.
//
// With add_self_loops the layer runs on graph.with_self_loops() (existing loops removed, then
// (i, i) for every i < min(Ns, Nd); SelfLoopedGraph, as GATConv). With edge_dim, edge_attr
// (E, edge_dim) follows the input graph's edge order and the loops' attributes are made by
// fill_value as GATConv's (attended_edge_attr, graph_attention.h; on a bipartite graph as
// ops::self_loop_attr describes). Unlike GATConv's edge term (E, H), GATv2's enters the LeakyReLU
// per feature, so it is the (E, H*F) projection PyG computes. Everything goes through ops, so the
// layer runs unchanged on CPU and CUDA.
// Parameter names follow PyG: att (H, F) (PyG: (1, H, F)), bias, lin_l.weight, lin_l.bias,
// lin_r.weight, lin_r.bias (lin_r is lin_l with share_weights, registered once, as PyG's
// parameters() lists it), lin_edge.weight, res.weight. Weights are stored (in, out), the
// transpose of PyG's.
#pragma once

#include <cstdint>
#include <memory>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"
#include "gat/layers/graph_attention.h"
#include "gat/layers/linear.h"

namespace gat {

// dst_in_channels > 0: lin_r and res take x_dst's width.
struct GATv2ConvOptions : GraphAttentionOptions {
  bool share_weights = false;  // one projection for sources and destinations (lin_r = lin_l)
};

class GATv2Conv : public GraphAttentionLayer {
 public:
  // `init` draws, in PyG's reset_parameters order: lin_l (weight glorot, then bias uniform in
  // +-1/sqrt(in)), lin_r (likewise; not with share_weights), lin_edge.weight (glorot), res.weight
  // (glorot), att (glorot with fan_in H, fan_out F); bias = 0.
  GATv2Conv(const GATv2ConvOptions& options, Generator& init);

  // forward(x, graph, [edge_attr,] gen, [attention]) and forward(x_src, x_dst, graph,
  // [edge_attr,] gen, [attention]): GraphAttentionLayer (graph_attention.h), as GATConv's.

  const GATv2ConvOptions& options() const { return options_; }
  int64_t out_features() const;  // H*F if concat else F

  std::shared_ptr<Linear> lin_l;  // (in, H*F), bias with options.bias: sources (score and values)
  std::shared_ptr<Linear> lin_r;  // (dst in, H*F): destinations; the same object as lin_l with share_weights
  std::shared_ptr<Linear> lin_edge;  // (edge_dim, H*F), no bias; null without edge_dim
  Tensor att;                        // (H, F)
  Tensor bias;                       // (out_features,), undefined without bias
  std::shared_ptr<Linear> res;       // (dst in, out_features), no bias; null without residual

 private:
  Tensor forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                       const Tensor& edge_attr, Generator& gen, Attention* attention) override;

  GATv2ConvOptions options_;
  SelfLoopedGraph looped_;  // with add_self_loops: the graph the layer runs on
};

}  // namespace gat
