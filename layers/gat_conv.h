// GATConv: the graph attention layer of Velickovic et al. (2018) with PyTorch Geometric's
// GATConv options and initialisation.
//
//   Wh  = x W                            viewed (N, H, F)
//   el  = Wh . att_src,  er = Wh . att_dst                        (N, H)
//   s   = LeakyReLU(el[src(e)] + er[dst(e)], negative_slope)     (E, H), never stored
//   out = softmax over each node's incoming edges of s, attention dropout, weighted sum of Wh
//         (gat_attention_aggregate: s computed inside the kernels)  (N, H, F)
//   out = concat ? out viewed (N, H*F) : mean over heads (N, F);  + residual(x);  + bias
//         (ops::head_mean averages the heads and adds the bias in one kernel when there is no residual)
//
// With add_self_loops the layer runs on graph.with_self_loops() (SelfLoopedGraph: the input graph
// itself when it already has one self loop per node, else a looped copy kept). Everything goes through ops, so the layer
// runs unchanged on CPU and CUDA. Parameter names follow PyG: lin.weight (stored (in, H*F), the
// transpose of PyG's), att_src and att_dst (H, F) (PyG: (1, H, F)), bias, res.weight.
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

struct GATConvOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;     // F, per head
  int64_t heads = 1;            // H
  bool concat = true;           // (N, H*F); else the mean over heads (N, F)
  double negative_slope = 0.2;  // of the LeakyReLU on the edge scores
  double dropout = 0.0;         // attention dropout rate (training mode only)
  // Dropout on Wh where it is aggregated (not where el, er are computed), as the GAT authors'
  // implementation does (its attn_head drops seq_fts with in_drop); PyG's GATConv has none (0).
  double value_dropout = 0.0;
  bool add_self_loops = true;
  bool bias = true;
  bool residual = false;        // + x R with R a bias-free Linear (in, output width)
  DType dtype = DType::f32;     // of the parameters
};

class GATConv : public Module {
 public:
  // `init` draws lin.weight, att_src, att_dst and res.weight (glorot), in that order; bias = 0.
  GATConv(const GATConvOptions& options, Generator& init);

  using Attention = AttentionWeights;  // graph_attention.h

  // x: (N, in_channels) on the graph's device, dense or sparse (the projections then use
  // ops::sparse_matmul) -> (N, H*F) if concat else (N, F).
  // `gen` supplies the attention-dropout stream in training mode (untouched in eval mode).
  // `attention`, when given, receives this pass's attention weights (PyG's
  // return_attention_weights); the layer itself keeps nothing of a pass.
  Tensor forward(const Features& x, const Graph& graph, Generator& gen,
                 Attention* attention = nullptr);

  const GATConvOptions& options() const { return options_; }
  int64_t out_features() const;  // H*F if concat else F

  std::shared_ptr<Linear> lin;  // (in, H*F), no bias
  Tensor att_src;               // (H, F)
  Tensor att_dst;               // (H, F)
  Tensor bias;                  // (out_features,), undefined without bias
  std::shared_ptr<Linear> res;  // (in, out_features), no bias; null without residual

 private:
  GATConvOptions options_;
  SelfLoopedGraph looped_;  // with add_self_loops: the graph the layer runs on
};

}  // namespace gat
