#include "gat/layers/gcn_conv.h"

#include <limits>
#include <vector>

#include "gat/framework/init.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/segment_reduce.h"
#include "gat/framework/ops/unary.h"

namespace gat {

GCNConv::GCNConv(const GCNConvOptions& options, Generator& init) : options_(options) {
  GAT_CHECK(options.in_channels > 0 && options.out_channels > 0, "GCNConv: in_channels ", options.in_channels,
            " and out_channels ", options.out_channels, " must be positive");
  GAT_CHECK(options.normalize || !options.add_self_loops,
            "GCNConv: add_self_loops needs normalize (PyG adds the loops only where it normalises)");
  lin = register_module(
      "lin", std::make_shared<Linear>(options.in_channels, options.out_channels, false, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({options.out_channels}, options.dtype));
}

const GCNConv::Propagation& GCNConv::propagation(const Graph& graph) {
  if (same_graph(propagation_.input, graph)) return propagation_;
  GAT_CHECK(!(options_.cached && cached_norm_.defined()),
            "GCNConv: cached keeps the first graph's normalisation, but forward was given another graph");
  Propagation p;
  p.input = graph;
  Graph g = graph;
  if (options_.add_self_loops) {
    std::vector<int32_t> origins;  // (E',): an edge of graph, or -1 for a loop that takes the fill value
    g = graph.with_self_loops(origins);
    for (int32_t& e : origins)
      if (e < 0) e = static_cast<int32_t>(graph.num_edges());  // the fill value, appended to the weights
    p.origins =
        ops::RowIndex(Tensor::from_vector(origins, {static_cast<int64_t>(origins.size())}), g.device());
  }
  p.plans = {g, ops::RowIndex(g.edge_src(), g.device()), ops::Segments(g.row_ptr(), g.device())};
  if (options_.normalize) p.targets = ops::RowIndex(g.edge_dst(), g.device());
  propagation_ = std::move(p);
  return propagation_;
}

Tensor GCNConv::edge_norm(const Propagation& p, const Tensor& edge_weight, DType dtype) const {
  const Graph& g = p.plans.graph;
  Tensor w;  // (E',)
  if (!edge_weight.defined()) {
    w = Tensor::full({g.num_edges()}, 1.0, dtype, g.device());
  } else if (options_.add_self_loops) {
    const Tensor fill = Tensor::full({1}, options_.improved ? 2.0 : 1.0, dtype, g.device());
    w = ops::index_rows(ops::concat({edge_weight, fill}, 0), p.origins);
  } else {
    w = edge_weight;
  }
  if (!options_.normalize) return w;
  const double smallest_normal =
      dtype == DType::f32 ? std::numeric_limits<float>::min() : std::numeric_limits<double>::min();
  const Tensor deg = ops::segment_sum(w, p.plans.in_edges);                     // (N,)
  const Tensor inv_sqrt = ops::sqrt(deg) / ops::maximum(deg, smallest_normal);  // (N,), 0 where deg = 0
  return ops::index_rows(inv_sqrt, p.plans.sources) * w * ops::index_rows(inv_sqrt, p.targets);
}

Tensor GCNConv::forward(const Tensor& x, const Graph& graph) { return forward(x, graph, Tensor()); }

Tensor GCNConv::forward(const Tensor& x, const Graph& graph, const Tensor& edge_weight) {
  check_message_inputs("GCNConv", x, nullptr, graph, options_.in_channels, options_.in_channels);
  if (edge_weight.defined()) {
    check_dim("GCNConv", "edge_weight", edge_weight, 1);
    GAT_CHECK(edge_weight.numel() == graph.num_edges() && edge_weight.dtype() == x.dtype() &&
                  edge_weight.device() == x.device(),
              "GCNConv: 'edge_weight' ", edge_weight.describe(), " must be (", graph.num_edges(),
              ",) for the graph's edges, with x's dtype and device (x ", x.describe(), ")");
  }
  const Propagation& p = propagation(graph);
  Tensor norm;  // (E',) or undefined: every edge weighs 1
  if (options_.cached && cached_norm_.defined())
    norm = cached_norm_;
  else if (options_.normalize || edge_weight.defined())
    norm = edge_norm(p, edge_weight, x.dtype());
  if (options_.cached && options_.normalize && !cached_norm_.defined()) cached_norm_ = norm.detach();

  const Tensor h = lin->forward(x);  // (N, out)
  const Tensor out =
      norm.defined()
          ? ops::segment_sum(ops::index_rows(h, p.plans.sources) * ops::reshape(norm, {norm.numel(), 1}),
                             p.plans.in_edges)
          : sum_neighbours(h, p.plans);  // (N, out)
  return bias.defined() ? ops::add_bias(out, bias) : out;
}

}  // namespace gat
