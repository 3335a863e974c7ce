#include "gat/layers/graph_attention.h"

#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/head_mean.h"
#include "gat/framework/ops/reshape.h"
#include "gat/layers/message_passing.h"

namespace gat {

void check_attention_options(const char* layer, const GraphAttentionOptions& options) {
  const int64_t in = options.in_channels, dst_in = options.dst_in_channels, F = options.out_channels,
                H = options.heads;
  GAT_CHECK(in > 0 && F > 0 && H > 0, layer, ": in_channels ", in, ", out_channels ", F, " and heads ", H,
            " must be positive");
  GAT_CHECK(dst_in >= 0, layer, ": dst_in_channels ", dst_in,
            " must be positive (the destinations' width: in_channels a pair) or 0 (one width)");
  check_in_range(detail::concat(layer, ": attention dropout"), options.dropout, kDropoutRateRange);
  checked_mul(H, F, detail::concat(layer, ": heads x out_channels").c_str());
  GAT_CHECK(options.edge_dim >= 0, layer, ": edge_dim ", options.edge_dim,
            " is negative (0: no edge features)");
}

namespace {

// x (rows, cols), dense or sparse; `nodes` names the rows in the message.
void check_features(const char* layer, const char* name, const Features& x, int64_t rows, const char* nodes,
                    int64_t cols) {
  if (!x.is_sparse()) check_dim(layer, name, x.dense(), 2);
  GAT_CHECK(x.rows() == rows && x.cols() == cols, layer, ": '", name, "' ", x.describe(), " must be (", rows,
            ", ", cols, ") for a graph of ", rows, " ", nodes, " and ", cols, " input channels");
}

}  // namespace

void check_attention_inputs(const char* layer, const Features& x_src, const Features* x_dst,
                            const Graph& graph, int64_t in_channels, int64_t dst_in_channels) {
  const int64_t Ns = graph.num_src_nodes(), Nd = graph.num_dst_nodes();
  const int64_t dst_in = dst_in_channels > 0 ? dst_in_channels : in_channels;
  if (x_dst) {
    check_features(layer, "x_src", x_src, Ns, "sources", in_channels);
    check_features(layer, "x_dst", *x_dst, Nd, "destinations", dst_in);
    return;
  }
  GAT_CHECK(!graph.is_bipartite(), layer,
            ": one 'x' needs a graph on one node set, but the graph is bipartite (", Ns, " sources, ", Nd,
            " destinations): pass x_src and x_dst");
  check_features(layer, "x", x_src, Nd, "nodes", in_channels);
  check_features(layer, "x", x_src, Nd, "nodes", dst_in);
}

const Graph& SelfLoopedGraph::of(const Graph& graph) {
  if (graph.one_self_loop_per_node()) {  // built with its loops (e.g. by the trainer): no copy
    input_ = looped_ = Graph();
    return graph;
  }
  if (!same_graph(input_, graph)) {
    looped_ = graph.with_self_loops();
    input_ = graph;
  }
  return looped_;
}

Tensor attended_edge_attr(const char* layer, const Linear* lin_edge, const Tensor& edge_attr,
                          const Graph& graph, const Graph& g, bool add_self_loops,
                          const ops::SelfLoopFill& fill) {
  if (!lin_edge) {
    GAT_CHECK(!edge_attr.defined(), layer, ": 'edge_attr' ", edge_attr.describe(),
              " given but the layer has no edge features (edge_dim 0)");
    return Tensor();
  }
  const int64_t D = lin_edge->in_features(), E = graph.num_edges();
  GAT_CHECK(edge_attr.defined(), layer, ": edge_dim is ", D, " but no 'edge_attr' was given");
  check_dim(layer, "edge_attr", edge_attr, 2);
  GAT_CHECK(edge_attr.size(0) == E && edge_attr.size(1) == D, layer, ": 'edge_attr' ", edge_attr.describe(),
            " must be (", E, ", ", D, ") for a graph of ", E, " edges and edge_dim ", D);
  const Tensor& param = lin_edge->weight;
  GAT_CHECK(edge_attr.dtype() == param.dtype() && edge_attr.device() == param.device(), layer,
            ": 'edge_attr' ", edge_attr.describe(), " must have the parameters' dtype and device (",
            param.describe(), ")");
  return add_self_loops ? ops::self_loop_attr(graph, g, edge_attr, fill) : edge_attr;  // (E', D)
}

Tensor combine_heads(const Tensor& heads, bool concat, const Tensor& residual, const Tensor& bias) {
  const int64_t N = heads.size(0), H = heads.size(1), F = heads.size(2);
  const bool mean = !concat && H > 1;  // the mean of one head is that head
  const bool bias_in_mean = mean && !residual.defined() && bias.defined();
  Tensor out = mean ? ops::head_mean(heads, bias_in_mean ? bias : Tensor())
                    : ops::reshape(heads, {N, H * F});  // (N, out)
  if (residual.defined()) out = ops::add(out, residual);
  if (bias.defined() && !bias_in_mean) out = ops::add_bias(out, bias);
  return out;
}

}  // namespace gat
