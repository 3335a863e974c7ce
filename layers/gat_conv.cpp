#include "gat/layers/gat_conv.h"

#include "gat/framework/init.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/csr_softmax_aggregate.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/head_dot.h"
#include "gat/framework/ops/head_mean.h"
#include "gat/framework/ops/reshape.h"

namespace gat {

GATConv::GATConv(const GATConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, F = options.out_channels, H = options.heads;
  GAT_CHECK(in > 0 && F > 0 && H > 0, "GATConv: in_channels ", in, ", out_channels ", F,
            " and heads ", H, " must be positive");
  GAT_CHECK(options.dst_in_channels >= 0, "GATConv: dst_in_channels ", options.dst_in_channels,
            " must be positive (bipartite: lin_src and lin_dst) or 0 (one projection, lin)");
  const int64_t dst_in = options.dst_in_channels > 0 ? options.dst_in_channels : in;
  GAT_CHECK(options.dropout >= 0.0 && options.dropout < 1.0, "GATConv: attention dropout ",
            options.dropout, " is outside [0, 1)");
  checked_mul(H, F, "GATConv: heads x out_channels");
  if (options.dst_in_channels > 0) {
    lin_src = register_module("lin_src", std::make_shared<Linear>(in, H * F, false, init, options.dtype));
    lin_dst = register_module("lin_dst", std::make_shared<Linear>(dst_in, H * F, false, init, options.dtype));
  } else {
    lin = register_module("lin", std::make_shared<Linear>(in, H * F, false, init, options.dtype));
  }
  // PyG's glorot on att (1, H, F) uses fan_in = H, fan_out = F.
  att_src = register_parameter("att_src", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  att_dst = register_parameter("att_dst", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({out_features()}, options.dtype));
  if (options.residual)
    res = register_module("res", std::make_shared<Linear>(dst_in, out_features(), false, init, options.dtype));
}

int64_t GATConv::out_features() const {
  return options_.concat ? options_.heads * options_.out_channels : options_.out_channels;
}

const Graph& GATConv::graph_for(const Graph& graph) {
  if (!options_.add_self_loops) return graph;
  if (graph.one_self_loop_per_node()) {  // built with its loops (e.g. by the trainer): no copy
    cached_input_ = cached_looped_ = Graph();
    return graph;
  }
  if (!cached_input_.row_ptr().defined() || !cached_input_.row_ptr().same(graph.row_ptr()) ||
      !cached_input_.edge_src().same(graph.edge_src())) {
    cached_looped_ = graph.with_self_loops();
    cached_input_ = graph;
  }
  return cached_looped_;
}

namespace {

// x (rows, cols), dense or sparse; `nodes` names the rows in the message.
void check_features(const char* name, const Features& x, int64_t rows, const char* nodes, int64_t cols) {
  if (!x.is_sparse()) check_dim("GATConv", name, x.dense(), 2);
  GAT_CHECK(x.rows() == rows && x.cols() == cols, "GATConv: '", name, "' ", x.describe(),
            " must be (", rows, ", ", cols, ") for a graph of ", rows, " ", nodes, " and ", cols,
            " input channels");
}

}  // namespace

Tensor GATConv::forward(const Features& x, const Graph& graph, Generator& gen,
                        Attention* attention) {
  return forward_sides(x, nullptr, graph, gen, attention);
}

Tensor GATConv::forward(const Features& x_src, const Features& x_dst, const Graph& graph,
                        Generator& gen, Attention* attention) {
  return forward_sides(x_src, &x_dst, graph, gen, attention);
}

Tensor GATConv::forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                              Generator& gen, Attention* attention) {
  const int64_t Ns = graph.num_src_nodes(), N = graph.num_dst_nodes(), H = options_.heads,
                F = options_.out_channels;
  const Features& xd = x_dst ? *x_dst : x_src;
  if (x_dst) {
    check_features("x_src", x_src, Ns, "sources", options_.in_channels);
    check_features("x_dst", xd, N, "destinations", lin ? options_.in_channels : options_.dst_in_channels);
  } else {
    GAT_CHECK(!graph.is_bipartite(), "GATConv: one 'x' needs a graph on one node set, but the graph "
              "is bipartite (", Ns, " sources, ", N, " destinations): pass x_src and x_dst");
    check_features("x", x_src, N, "nodes", options_.in_channels);
    if (lin_dst) check_features("x", x_src, N, "nodes", options_.dst_in_channels);
  }
  const Graph& g = graph_for(graph);

  // One x through lin: one projection for both sides.
  Tensor wh = ops::reshape((lin ? *lin : *lin_src).forward(x_src), {Ns, H, F});  // (Ns, H, F)
  Tensor wh_dst = !x_dst && lin ? wh : ops::reshape((lin ? *lin : *lin_dst).forward(xd), {N, H, F});  // (N, H, F)
  Tensor el = ops::head_dot(wh, att_src);      // (Ns, H)
  Tensor er = ops::head_dot(wh_dst, att_dst);  // (N, H)
  const DropoutKey key = is_training() && options_.dropout > 0.0
                             ? gen.dropout_key(static_cast<float>(options_.dropout))
                             : DropoutKey{};
  Tensor values = wh;  // (Ns, H, F)
  if (is_training() && options_.value_dropout > 0.0)
    values = ops::dropout(wh, gen.dropout_key(static_cast<float>(options_.value_dropout)));
  Tensor out = ops::gat_attention_aggregate(g, el, er, values, options_.negative_slope, key);  // (N, H, F)
  // Averaged heads take the bias in the same kernel, unless the residual is added before it.
  const bool bias_in_mean = !options_.concat && !res && bias.defined();
  out = options_.concat ? ops::reshape(out, {N, H * F})
                        : ops::head_mean(out, bias_in_mean ? bias : Tensor());  // (N, out_features)
  if (res) out = ops::add(out, res->forward(xd));
  if (bias.defined() && !bias_in_mean) out = ops::add_bias(out, bias);

  if (attention)
    *attention = {g, ops::csr_softmax(g, ops::gat_edge_scores(g, el.detach(), er.detach(),
                                                              options_.negative_slope))};
  return out;
}

}  // namespace gat
