// InductiveGAT: the GAT paper's network for the inductive PPI task (Velickovic et al. 2018,
// section 3.3), as in PyG's PPI example script:
//
//   x -> GATConv(F_in, hidden, heads[0], concat) + skip -> ELU
//     -> GATConv(hidden * heads[0], hidden, heads[1], concat) + skip -> ELU
//     -> GATConv(hidden * heads[1], num_labels, output_heads, mean over heads) + skip -> logits (N, C)
//
// Each skip is the layer's residual (GATConvOptions::residual: x times a bias-free weight, added
// before the bias; PyG's example adds a Linear with a bias instead, the same function). No
// dropout. The paper: hidden 256, heads 4 and 4, output_heads 6; multi-label logits for
// binary_cross_entropy_with_logits. Built only from the public layers in layers/.
#pragma once

#include <cstdint>
#include <memory>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"
#include "gat/layers/gat_conv.h"

namespace gat {

struct InductiveGATConfig {
  int64_t in_features = 0;
  int64_t num_labels = 0;
  int64_t hidden = 256;      // features per head of layers 1 and 2
  int64_t heads = 4;         // heads of layers 1 and 2 (concatenated)
  int64_t output_heads = 6;  // heads of layer 3 (averaged)
  bool residual = true;      // the skip connections
  DType dtype = DType::f32;  // of the parameters
};

class InductiveGAT : public Module {
 public:
  static constexpr int kLayers = 3;
  // `init` draws the parameters, conv1's first. Errors: the layers' (GATConv's options).
  InductiveGAT(const InductiveGATConfig& config, Generator& init);
  // x (N, in_features) dense, graph of N nodes (a batch of graphs: batch_graphs); the layers run
  // on graph.with_self_loops() (pass a looped graph to build it once) -> logits (N, num_labels).
  Tensor forward(const Tensor& x, const Graph& graph);

  const InductiveGATConfig& config() const { return config_; }
  std::shared_ptr<GATConv> conv1, conv2, conv3;  // registered as "conv1", "conv2", "conv3"

 private:
  InductiveGATConfig config_;
};

}  // namespace gat
