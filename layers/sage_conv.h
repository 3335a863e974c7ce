// SAGEConv: GraphSAGE's layer (Hamilton et al. 2017) with PyTorch Geometric 2.8's SAGEConv options
// (aggr='mean'), parameter names and initialisation.
//
//   m   = the mean over the edges j -> i of s[j], 0 for a node without in-edges   (Nd, in)
//         s = x_src, or relu(lin(x_src)) with project
//   out = lin_l(m)  (+ lin_r(x_dst) with root_weight)                               (Nd, out)
//   out = out / max(|out|_2, 1e-12) per row with normalize (F.normalize(out, p=2, dim=-1)),
//         computed as out / sqrt(max(|out|^2, 1e-24)): a zero row gives 0 and the gradient
//         PyG's gives, g / 1e-12
//
// Bipartite input as PyG's: with dst_in_channels > 0 (PyG's in_channels = (src, dst)) lin_r takes
// x_dst's width; forward(x_src, x_dst, graph) takes the sources' and the destinations' features
// of a graph of Ns sources and Nd destinations. One x is both. No self loops are added; an edge
// listed twice counts twice in the mean (Graph's remove_duplicates = false keeps it). Everything
// goes through ops, so the layer runs unchanged on CPU and CUDA.
//
// Parameters as PyG names them, weights stored (in, out), the transpose of PyG's: lin.weight,
// lin.bias (project only; (in, in)), lin_l.weight, lin_l.bias (bias only), lin_r.weight (root_weight
// only; no bias). Each drawn as PyG's Linear without initialisers: weight and bias uniform in
// [-1/sqrt(in), 1/sqrt(in)), in that order: lin, lin_l, lin_r.
#pragma once

#include <cstdint>
#include <memory>

#include "gat/framework/graph.h"
#include "gat/framework/module.h"
#include "gat/framework/rng.h"
#include "gat/framework/tensor.h"
#include "gat/layers/linear.h"
#include "gat/layers/message_passing.h"

namespace gat {

struct SAGEConvOptions {
  int64_t in_channels = 0;      // of x, or of x_src when dst_in_channels > 0
  int64_t dst_in_channels = 0;  // > 0: of x_dst (PyG's in_channels pair)
  int64_t out_channels = 0;
  bool normalize = false;    // L2-normalise each output row
  bool root_weight = true;   // add lin_r(x_dst)
  bool project = false;      // the sources through lin and relu before the mean
  bool bias = true;          // lin_l's
  DType dtype = DType::f32;  // of the parameters
};

class SAGEConv : public Module {
 public:
  SAGEConv(const SAGEConvOptions& options, Generator& init);

  // x (N, in_channels) for a graph on one node set of N nodes -> (N, out_channels).
  Tensor forward(const Tensor& x, const Graph& graph) { return forward_sides(x, nullptr, graph); }
  // x_src (Ns, in_channels), x_dst (Nd, dst_in_channels or in_channels) -> (Nd, out_channels).
  Tensor forward(const Tensor& x_src, const Tensor& x_dst, const Graph& graph) {
    return forward_sides(x_src, &x_dst, graph);
  }

  const SAGEConvOptions& options() const { return options_; }

  std::shared_ptr<Linear> lin;    // (in, in) with bias; null without project
  std::shared_ptr<Linear> lin_l;  // (in, out), bias with options.bias
  std::shared_ptr<Linear> lin_r;  // (dst in, out), no bias; null without root_weight

 private:
  Tensor forward_sides(const Tensor& x_src, const Tensor* x_dst, const Graph& graph);

  SAGEConvOptions options_;
  EdgePlanCache plans_;
};

}  // namespace gat
