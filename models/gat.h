// GAT: the two-layer graph attention network of Velickovic et al. (2018), as in PyG's example:
//
//   x -> dropout(p) -> GATConv(F_in, hidden, heads, concat, attention dropout p) -> ELU
//     -> dropout(p) -> GATConv(hidden * heads, C, output_heads, mean over heads, attention
//        dropout p) -> logits (N, C)
//
// (With GATConv layers the first dropout runs inside conv1 (GATConvOptions::input_dropout: in its
// projection's product for sparse features), and ELU and the dropout after it inside conv1's
// kernels (GATConvOptions::elu); with GATv2Conv layers the first dropout is the Dropout module and
// ELU + dropout one op, ops::elu_dropout. The masks are the same either way.)
//
// The paper's recipe: hidden 8, heads 8, output_heads 1 (8 for PubMed), p = 0.6. With
// layer = gatv2 the same network and recipe with GATv2Conv layers (Brody et al. 2022).
// Built only from the public layers in layers/.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gat/framework/check.h"
#include "gat/framework/graph.h"
#include "gat/framework/io.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"
#include "gat/layers/dropout.h"
#include "gat/layers/gat_conv.h"
#include "gat/layers/gatv2_conv.h"

namespace gat {

// The attention layer the network is built of: GATConv or GATv2Conv.
enum class AttentionLayer { gat, gatv2 };
const char* attention_layer_name(AttentionLayer layer);  // "gat", "gatv2"

struct GATConfig {
  int64_t in_features = 0;
  int64_t num_classes = 0;
  int64_t hidden = 8;        // features per head of the first layer
  int64_t heads = 8;         // heads of the first layer (concatenated)
  int64_t output_heads = 1;  // heads of the output layer (averaged)
  double dropout = 0.6;      // on the inputs of both layers and on both layers' attention
  // GATConvOptions::value_dropout of both layers: the authors' code drops the projected features
  // too (attn_head's second in_drop). Measured on the H200, 10 seeds: Cora 83.21 +- 0.42 with it,
  // 83.00 +- 0.41 without; CiteSeer 72.59 +- 0.68 with, 71.28 +- 0.81 without (BENCHMARKS.md).
  // GATv2Conv has none (its source rows are both the scores' terms and the values): 0 with gatv2.
  double value_dropout = 0.6;
  double negative_slope = 0.2;
  DType dtype = DType::f32;  // of the parameters
  // The precision policy (docs/precision.md): f32, everything in the parameters' dtype; bf16 (with
  // f32 parameters), the features, activations and their gradients stored in bf16 and computed
  // in f32, the parameters and the optimiser's state f32 (master weights), the loss f32.
  // Checkpoints without the key: f32.
  DType precision = DType::f32;
  // edge_dim of both layers (GATConvOptions', GATv2ConvOptions'): the dataset's edge features
  // (0: none; checkpoints without the key have none).
  int64_t edge_dim = 0;
  // fill_value of both layers: the self loops' edge features from the in-edges' (PyG's
  // add_self_loops fill_value; default the mean, as PyG's; checkpoints without the key: the mean).
  // Used only with edge_dim > 0.
  ops::SelfLoopFill fill_value{};
  AttentionLayer layer = AttentionLayer::gat;

  // The values each field may take (validate(), from_metadata() and gat_train's flags use them).
  static constexpr Range<int64_t> kSizeRange{
      1, std::numeric_limits<int32_t>::max()};  // in_features, num_classes
  static constexpr Range<int64_t> kHiddenRange{1, int64_t{1} << 16};
  static constexpr Range<int64_t> kHeadsRange{1, 1024};              // heads, output_heads
  static constexpr Range<double> kDropoutRange = kDropoutRateRange;  // dropout, value_dropout
  static constexpr Range<double> kNegativeSlopeRange{0.0, 1.0};
  static constexpr Range<int64_t> kEdgeDimRange{0, int64_t{1} << 16};

  // Throws a gat::Error naming the first field outside its range (or a value dropout with
  // gatv2); `where` starts the message.
  void validate(const std::string& where = "GATConfig") const;

  // Every field as checkpoint metadata (JSON numbers as text, dtype as "f32"/"f64", precision as
  // "f32"/"bf16", layer as
  // "gat"/"gatv2"; without the key: gat, as checkpoints before it), and back:
  // from_metadata(to_metadata()) == *this. Reading checks types and ranges (validate()); errors
  // name `where` (the file) and the key.
  io::Metadata to_metadata() const;
  static GATConfig from_metadata(const io::Metadata& metadata, const std::string& where);

  bool operator==(const GATConfig& o) const;
};

class GAT : public Module {
 public:
  // `init` draws the parameters (conv1's, then conv2's).
  GAT(const GATConfig& config, Generator& init);

  // x: (N, in_features), dense or sparse (input dropout and conv1's projection then stay sparse),
  // graph: N nodes; the layers run on graph.with_self_loops() (pass a graph that already has one
  // self loop per node and they use it as it is, keeping no copy) -> logits (N, num_classes).
  // `gen` supplies the dropout streams in training mode. edge_attr (E, edge_dim) in graph's edge
  // order, required with edge_dim > 0 (GATConv::forward, GATv2Conv::forward).
  Tensor forward(const Features& x, const Graph& graph, Generator& gen, const Tensor& edge_attr = Tensor());

  // The network on the blocks of a sampled batch (SampledBatch, framework/neighbor_sampler.h),
  // input layer first: blocks[0] for layer 1, blocks[1] for layer 2. x: (Ns0, in_features)
  // dense, the inputs of blocks[0]'s sources -> logits (Nd1, num_classes) of blocks[1]'s
  // destinations. edge_attrs: one per block (its edges' rows, in its edge order) with
  // edge_dim > 0, else empty.
  Tensor forward(const Tensor& x, const std::vector<Graph>& blocks, Generator& gen,
                 const std::vector<Tensor>& edge_attrs = {});

  // Layer `layer` (1 or 2) alone, with what the network runs before it (gatv2: the input dropout
  // before layer 1, ELU and the hidden dropout before layer 2; gat: inside the layers). On a
  // graph of one node set, x holds its nodes' inputs -> (N, out). On a block (a bipartite graph
  // whose destinations are its first Nd sources) x (Ns, in) is dense, the sources' inputs, and
  // the destinations' are its first Nd rows -> (Nd, out). out: heads * hidden for layer 1 (after
  // ELU), num_classes for layer 2. Layer-wise inference calls it layer by layer over all nodes.
  Tensor forward_layer(int layer, const Features& x, const Graph& graph, Generator& gen,
                       const Tensor& edge_attr = Tensor());
  static constexpr int kLayers = 2;

  const GATConfig& config() const { return config_; }

  std::shared_ptr<Dropout> dropout;
  // The two layers, registered as "conv1" and "conv2": GATConv's with layer gat, GATv2Conv's with
  // gatv2 (the other pair is null).
  std::shared_ptr<GATConv> conv1, conv2;
  std::shared_ptr<GATv2Conv> v2_conv1, v2_conv2;

 private:
  GATConfig config_;
};

}  // namespace gat
