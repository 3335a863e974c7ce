#include "gat/layers/gatv2_conv.h"

#include "gat/framework/init.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"
#include "gat/framework/ops/reshape.h"

namespace gat {

GATv2Conv::GATv2Conv(const GATv2ConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, F = options.out_channels, H = options.heads;
  check_attention_options("GATv2Conv", options);
  const int64_t dst_in = options.dst_in_channels > 0 ? options.dst_in_channels : in;
  GAT_CHECK(!options.share_weights || dst_in == in,
            "GATv2Conv: share_weights projects x_src and x_dst with one "
            "Linear, but in_channels ",
            in, " and dst_in_channels ", dst_in, " differ");
  auto projection = [&](int64_t width) {
    return std::make_shared<Linear>(width, H * F, options.bias, init, options.dtype, LinearBiasInit::fan_in);
  };
  lin_l = register_module("lin_l", projection(in));
  lin_r = options.share_weights ? lin_l : register_module("lin_r", projection(dst_in));
  if (options.edge_dim > 0)
    lin_edge = register_module("lin_edge",
                               std::make_shared<Linear>(options.edge_dim, H * F, false, init, options.dtype));
  if (options.residual)
    res =
        register_module("res", std::make_shared<Linear>(dst_in, out_features(), false, init, options.dtype));
  // PyG's glorot on att (1, H, F) uses fan_in = H, fan_out = F.
  att = register_parameter("att", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({out_features()}, options.dtype));
}

int64_t GATv2Conv::out_features() const {
  return options_.concat ? options_.heads * options_.out_channels : options_.out_channels;
}

Tensor GATv2Conv::forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                                const Tensor& edge_attr, Generator& gen, Attention* attention) {
  const int64_t Ns = graph.num_src_nodes(), Nd = graph.num_dst_nodes(), H = options_.heads,
                F = options_.out_channels;
  check_attention_inputs("GATv2Conv", x_src, x_dst, graph, options_.in_channels, options_.dst_in_channels);
  const Features& xd = x_dst ? *x_dst : x_src;
  const Graph& g = options_.add_self_loops ? looped_.of(graph) : graph;
  const Tensor attr =
      attended_edge_attr("GATv2Conv", lin_edge.get(), edge_attr, graph, g, options_.add_self_loops,
                         options_.fill_value);  // (E', D) or undefined
  const Tensor xe = attr.defined() ? ops::reshape(lin_edge->forward(attr), {g.num_edges(), H, F})
                                   : Tensor();  // (E', H, F) or undefined

  // One x with share_weights: one projection for both sides.
  const Tensor xl = ops::reshape(lin_l->forward(x_src), {Ns, H, F});  // (Ns, H, F): sources, values
  const Tensor xr =
      options_.share_weights && !x_dst ? xl : ops::reshape(lin_r->forward(xd), {Nd, H, F});  // (Nd, H, F)
  const DropoutKey key = is_training() && options_.dropout > 0.0
                             ? gen.dropout_key(static_cast<float>(options_.dropout))
                             : DropoutKey{};
  Tensor out =
      ops::gatv2_attention_aggregate(g, xl, xr, att, options_.negative_slope, key, xe);  // (Nd, H, F)
  out = combine_heads(out, options_.concat, res ? res->forward(xd) : Tensor(), bias);    // (Nd, out_features)

  if (attention)
    *attention = {g, ops::csr_softmax(g, ops::gatv2_edge_scores(g, xl.detach(), xr.detach(), att.detach(),
                                                                options_.negative_slope,
                                                                xe.defined() ? xe.detach() : Tensor()))};
  return out;
}

}  // namespace gat
