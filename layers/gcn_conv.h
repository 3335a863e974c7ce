// GCNConv: the graph convolution of Kipf and Welling (2017) with PyTorch Geometric 2.8's GCNConv
// options, parameter names and initialisation.
//
//   h   = x W                                   (N, out)   (lin: the transform comes first)
//   out = sum over the edges j -> i of norm[e] h[j]  (+ bias)   (N, out); 0 + bias for a node
//         without in-edges
//
// With normalize (PyG's gcn_norm), on the graph with self loops when add_self_loops:
//   w    = edge_weight, or 1 for every edge;
//   loops (add_self_loops, PyG's add_remaining_self_loops): existing (i, i) edges are removed and
//          one loop per node added, weighing what i's own loop weighed (its last one) where it had
//          one, else the fill value: 2 with improved, else 1. Without edge_weight every edge and
//          every loop weighs 1, improved or not: PyG 2.8 fills only a weight it was given;
//   deg[i] = the sum of w over i's in-edges (loop included);
//   norm[e] = deg[j]^-1/2 w[e] deg[i]^-1/2 for e = j -> i, with deg^-1/2 taken as 0 where deg = 0
//          (PyG masks the infinity). It is computed as sqrt(deg) / max(deg, the smallest normal
//          number of the dtype), which is deg^-1/2 for every positive degree not below that
//          number and 0 at 0, with no mask to build.
// Without normalize: norm = edge_weight (or 1); no loops (PyG refuses add_self_loops without
// normalize, and so does the constructor).
//
// Edges listed twice count twice, as in PyG's edge_index: build the Graph with
// GraphBuildOptions::remove_duplicates = false to keep them. edge_weight (E,) follows the input
// graph's edge order and receives a gradient when it requires one. The graph must be on one node
// set (PyG's GCNConv takes no bipartite input). Everything goes through ops, so the layer runs
// unchanged on CPU and CUDA, and every sum has a fixed order.
//
// cached (PyG's, for a graph that never changes): the first forward's looped graph and norm are
// kept and used by every later forward, which must pass the same graph; its edge_weight is then
// not read, and no gradient reaches it.
//
// Parameters as PyG names them: lin.weight, stored (in, out), the transpose of PyG's (out, in),
// glorot; bias (out,), zeros.
#pragma once

#include <cstdint>
#include <memory>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"
#include "gat/layers/linear.h"
#include "gat/layers/message_passing.h"

namespace gat {

struct GCNConvOptions {
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  bool improved = false;       // the loops' fill value 2 instead of 1 (with edge weights)
  bool cached = false;         // normalise the first graph once and keep it
  bool add_self_loops = true;  // needs normalize
  bool normalize = true;       // the symmetric normalisation above
  bool bias = true;
  DType dtype = DType::f32;  // of the parameters
};

class GCNConv : public Module {
 public:
  // `init` draws lin.weight (glorot); bias = 0.
  GCNConv(const GCNConvOptions& options, Generator& init);

  // x (N, in_channels) on the graph's device, the parameters' dtype -> (N, out_channels).
  Tensor forward(const Tensor& x, const Graph& graph);
  // The same with edge weights: edge_weight (E,) in graph's edge order, x's dtype and device.
  Tensor forward(const Tensor& x, const Graph& graph, const Tensor& edge_weight);

  const GCNConvOptions& options() const { return options_; }

  std::shared_ptr<Linear> lin;  // (in, out), no bias
  Tensor bias;                  // (out,), undefined without bias

 private:
  // The graph the layer propagates over and the plans that normalise on it.
  struct Propagation {
    Graph input;            // the graph forward was given
    EdgePlans plans;        // of the graph propagated over (looped with add_self_loops)
    ops::RowIndex targets;  // its edge_dst (E',): gathers deg^-1/2 of each edge's destination
    ops::RowIndex origins;  // (E',) into edge_weight with the fill value appended at E: the
                            // weight of each edge (add_self_loops only)
  };
  const Propagation& propagation(const Graph& graph);
  // norm (E',) over the propagated graph's edges, from edge_weight (E,) or undefined (all 1).
  Tensor edge_norm(const Propagation& p, const Tensor& edge_weight, DType dtype) const;

  GCNConvOptions options_;
  Propagation propagation_;
  Tensor cached_norm_;  // with cached: the first forward's norm, detached
};

}  // namespace gat
