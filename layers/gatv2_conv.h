// GATv2Conv: the graph attention layer of Brody et al. (2022), "How Attentive are Graph Attention
// Networks?", with PyTorch Geometric's GATv2Conv options, parameter names and initialisation.
//
//   xl  = x W_l + b_l,  xr = x W_r + b_r   viewed (N, H, F)   (xr = xl with share_weights)
//   xe  = edge_attr W_e viewed (E, H, F)   (with edge_dim; PyG's lin_edge(edge_attr))
//   s   = att . LeakyReLU(xl[src(e)] + xr[dst(e)] (+ xe[e]), negative_slope)   (E, H), never stored
//   out = softmax over each node's incoming edges of s, attention dropout, weighted sum of
//         xl[src(e)] (ops::gatv2_attention_aggregate: nothing of size E x H x F is built)
//         (N, H, F)
//   out = concat ? out viewed (N, H*F) : mean over heads (N, F);  + residual(x);  + bias
//
// Unlike GAT's, the score is not a sum of a source and a destination term: the LeakyReLU acts
// on the sum of the two projected rows, so the ranking of a node's neighbours depends on the node.
// With add_self_loops the layer runs on graph.with_self_loops() (SelfLoopedGraph, as GATConv).
// With edge_dim, edge_attr (E, edge_dim) follows the input graph's edge order and the loops'
// attributes are made by fill_value as GATConv's (attended_edge_attr, graph_attention.h). Unlike
// GATConv's edge term (E, H), GATv2's enters the LeakyReLU per feature, so it is the (E, H*F)
// projection PyG computes. Everything goes through ops, so the layer runs unchanged on CPU and CUDA.
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

struct GATv2ConvOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;     // F, per head
  int64_t heads = 1;            // H
  bool concat = true;           // (N, H*F); else the mean over heads (N, F)
  double negative_slope = 0.2;  // of the LeakyReLU inside the score
  double dropout = 0.0;         // attention dropout rate (training mode only)
  bool add_self_loops = true;
  int64_t edge_dim = 0;          // D of edge_attr; 0: no edge features (PyG: edge_dim=None)
  ops::SelfLoopFill fill_value;  // the self loops' edge attributes (PyG's default 'mean')
  bool bias = true;             // lin_l's and lin_r's biases and the output bias
  bool share_weights = false;   // one projection for sources and destinations (lin_r = lin_l)
  bool residual = false;        // + x R with R a bias-free Linear (in, output width)
  DType dtype = DType::f32;     // of the parameters
};

class GATv2Conv : public Module {
 public:
  // `init` draws, in PyG's reset_parameters order: lin_l (weight glorot, then bias uniform in
  // +-1/sqrt(in)), lin_r (likewise; not with share_weights), lin_edge.weight (glorot), res.weight
  // (glorot), att (glorot with fan_in H, fan_out F); bias = 0.
  GATv2Conv(const GATv2ConvOptions& options, Generator& init);

  using Attention = AttentionWeights;  // graph_attention.h

  // x: (N, in_channels) on the graph's device, dense or sparse (the projections then use
  // ops::sparse_matmul) -> (N, H*F) if concat else (N, F).
  // `gen` supplies the attention-dropout stream in training mode (untouched in eval mode).
  // `attention`, when given, receives this pass's attention weights (PyG's
  // return_attention_weights); the layer itself keeps nothing of a pass.
  Tensor forward(const Features& x, const Graph& graph, Generator& gen,
                 Attention* attention = nullptr);
  // The same with edge features: edge_attr (E, edge_dim) in graph's edge order, the parameters'
  // dtype and device, required with edge_dim > 0 and refused without (undefined = none).
  Tensor forward(const Features& x, const Graph& graph, const Tensor& edge_attr, Generator& gen,
                 Attention* attention = nullptr);

  const GATv2ConvOptions& options() const { return options_; }
  int64_t out_features() const;  // H*F if concat else F

  std::shared_ptr<Linear> lin_l;  // (in, H*F), bias with options.bias: sources (score and values)
  std::shared_ptr<Linear> lin_r;  // (in, H*F): destinations; the same object as lin_l with share_weights
  std::shared_ptr<Linear> lin_edge;  // (edge_dim, H*F), no bias; null without edge_dim
  Tensor att;                     // (H, F)
  Tensor bias;                    // (out_features,), undefined without bias
  std::shared_ptr<Linear> res;    // (in, out_features), no bias; null without residual

 private:
  GATv2ConvOptions options_;
  SelfLoopedGraph looped_;  // with add_self_loops: the graph the layer runs on
};

}  // namespace gat
