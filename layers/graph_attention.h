// What the graph attention layers (GATConv, GATv2Conv) share: their forward's four forms, their
// option checks, the input check, the graph with self loops they run on, the edge attributes they
// attend over, the attention weights they return on request, and how the aggregated heads become
// the layer's output.
#pragma once

#include <cstdint>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/rng.h"
#include "gat/framework/sparse.h"
#include "gat/framework/tensor.h"
#include "gat/layers/dropout.h"
#include "gat/layers/linear.h"

namespace gat {

// Attention weights without dropout: the softmax of the edge scores over every node's incoming
// edges. `graph` is the graph they belong to (with self loops when add_self_loops), `weights`
// (E, H) in its edge order. No autograd.
struct AttentionWeights {
  Graph graph;
  Tensor weights;  // (E, H)
};

// The forward of a graph attention layer, on a graph of one node set or a bipartite one, with or
// without edge features: every form calls the layer's forward_sides.
class GraphAttentionLayer : public Module {
 public:
  using Attention = AttentionWeights;

  // x: (N, in_channels) on the graph's device, dense or sparse (the projections then use
  // ops::sparse_matmul) -> (N, H*F) if concat else (N, F).
  // `gen` supplies the attention-dropout stream in training mode (untouched in eval mode).
  // `attention`, when given, receives this pass's attention weights (PyG's
  // return_attention_weights); the layer itself keeps nothing of a pass.
  Tensor forward(const Features& x, const Graph& graph, Generator& gen, Attention* attention = nullptr) {
    return forward_sides(x, nullptr, graph, Tensor(), gen, attention);
  }
  // The same without a generator, for eval mode (or no dropout): a layer that would draw (training
  // mode with a dropout rate > 0) throws a gat::Error saying to pass one.
  Tensor forward(const Features& x, const Graph& graph, Attention* attention = nullptr) {
    Generator none = Generator::refusing("a graph attention layer");
    return forward_sides(x, nullptr, graph, Tensor(), none, attention);
  }
  // The same with edge features: edge_attr (E, edge_dim) in graph's edge order, the parameters'
  // dtype and device, required with edge_dim > 0 and refused without (undefined = none).
  Tensor forward(const Features& x, const Graph& graph, const Tensor& edge_attr, Generator& gen,
                 Attention* attention = nullptr) {
    return forward_sides(x, nullptr, graph, edge_attr, gen, attention);
  }
  // Bipartite: x_src (Ns, in_channels), x_dst (Nd, dst_in_channels or in_channels) for a graph of
  // Ns sources and Nd destinations -> (Nd, H*F) if concat else (Nd, F); edge_attr as above.
  Tensor forward(const Features& x_src, const Features& x_dst, const Graph& graph, Generator& gen,
                 Attention* attention = nullptr) {
    return forward_sides(x_src, &x_dst, graph, Tensor(), gen, attention);
  }
  Tensor forward(const Features& x_src, const Features& x_dst, const Graph& graph, const Tensor& edge_attr,
                 Generator& gen, Attention* attention = nullptr) {
    return forward_sides(x_src, &x_dst, graph, edge_attr, gen, attention);
  }

 protected:
  // x_dst null: one x for both sides; edge_attr may be undefined.
  virtual Tensor forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                               const Tensor& edge_attr, Generator& gen, Attention* attention) = 0;
};

// The options GATConv and GATv2Conv share, with PyG's names and defaults.
struct GraphAttentionOptions {
  int64_t in_channels = 0;      // of x, or of x_src when dst_in_channels > 0
  int64_t dst_in_channels = 0;  // > 0: of x_dst (PyG's in_channels pair)
  int64_t out_channels = 0;     // F, per head
  int64_t heads = 1;            // H
  bool concat = true;           // (N, H*F); else the mean over heads (N, F)
  double negative_slope = 0.2;  // of the LeakyReLU in the edge scores
  double dropout = 0.0;         // attention dropout rate (training mode only), as every rate of
                                // the layers in kDropoutRateRange (layers/dropout.h)
  bool add_self_loops = true;
  bool bias = true;              // the output bias (GATv2Conv: lin_l's and lin_r's too)
  bool residual = false;         // + x_dst R with R a bias-free Linear (dst in, output width)
  int64_t edge_dim = 0;          // D of edge_attr; 0: no edge features (PyG: edge_dim=None)
  ops::SelfLoopFill fill_value;  // the self loops' edge attributes (PyG's default 'mean')
  DType dtype = DType::f32;      // of the parameters
};

// Throws a gat::Error starting with `layer` unless in_channels, out_channels (F) and heads (H)
// are positive, dst_in_channels is not negative (0: the destinations have in_channels too), H * F
// fits, the attention dropout rate is in kDropoutRateRange and edge_dim is not negative.
void check_attention_options(const char* layer, const GraphAttentionOptions& options);

// Throws a gat::Error starting with `layer` unless a layer's input fits the graph and its widths
// (dst_in_channels 0: in_channels for both sides). One x (x_dst null): the graph is on one node set
// of N nodes and x is (N, in_channels), and (N, dst_in_channels) as well (it is both sides). A
// pair: x_src is (Ns, in_channels) and *x_dst (Nd, dst_in_channels) for a graph of Ns sources and
// Nd destinations.
void check_attention_inputs(const char* layer, const Features& x_src, const Features* x_dst,
                            const Graph& graph, int64_t in_channels, int64_t dst_in_channels);

// The graph a layer with add_self_loops runs on: graph.with_self_loops() (existing loops removed,
// one per node added). That is the input graph itself when it already has one self loop per node
// (build the looped graph once and pass it, as gat_train does: no second graph), else a looped
// copy built once per input graph and kept until another graph comes.
class SelfLoopedGraph {
 public:
  const Graph& of(const Graph& graph);

 private:
  Graph input_;   // the last input graph seen without one loop per node ...
  Graph looped_;  // ... and its with_self_loops()
};

// The edge attributes a layer attends over, from the edge_attr its forward was given.
// lin_edge: the layer's projection of edge attributes (edge_dim, H*F), null without edge
// features: edge_attr must then be undefined, and so is the result. Else edge_attr must be
// (graph.num_edges(), edge_dim) in graph's edge order, with lin_edge's dtype and device, and with
// add_self_loops the loops' rows are made by `fill` from the other edges' (ops::self_loop_attr;
// g = graph.with_self_loops()): -> (E', edge_dim) in g's edge order (g: the graph the layer runs
// on). Errors start with `layer`.
Tensor attended_edge_attr(const char* layer, const Linear* lin_edge, const Tensor& edge_attr,
                          const Graph& graph, const Graph& g, bool add_self_loops,
                          const ops::SelfLoopFill& fill);

// A layer's output from its aggregated heads (N, H, F):
//   concat ? heads viewed (N, H*F) : the mean over heads (N, F);  + residual;  + bias
// residual (N, out) and bias (out,) may be undefined. A single head is its own mean (viewed, no
// kernel). Averaged heads take the bias in the same kernel (ops::head_mean) when there is no
// residual to add before it.
Tensor combine_heads(const Tensor& heads, bool concat, const Tensor& residual, const Tensor& bias);

}  // namespace gat
