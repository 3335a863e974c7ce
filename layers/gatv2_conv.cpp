#include "gat/layers/gatv2_conv.h"

#include "gat/framework/init.h"
#include "gat/framework/ops/csr_softmax_aggregate.h"
#include "gat/framework/ops/gatv2_attention_aggregate.h"
#include "gat/framework/ops/reshape.h"

namespace gat {

GATv2Conv::GATv2Conv(const GATv2ConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, F = options.out_channels, H = options.heads;
  check_attention_options("GATv2Conv", in, F, H, options.dropout, options.edge_dim);
  auto projection = [&] {
    return std::make_shared<Linear>(in, H * F, options.bias, init, options.dtype, LinearBiasInit::fan_in);
  };
  lin_l = register_module("lin_l", projection());
  lin_r = options.share_weights ? lin_l : register_module("lin_r", projection());
  if (options.edge_dim > 0)
    lin_edge = register_module("lin_edge", std::make_shared<Linear>(options.edge_dim, H * F, false, init, options.dtype));
  if (options.residual)
    res = register_module("res", std::make_shared<Linear>(in, out_features(), false, init, options.dtype));
  // PyG's glorot on att (1, H, F) uses fan_in = H, fan_out = F.
  att = register_parameter("att", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({out_features()}, options.dtype));
}

int64_t GATv2Conv::out_features() const {
  return options_.concat ? options_.heads * options_.out_channels : options_.out_channels;
}

Tensor GATv2Conv::forward(const Features& x, const Graph& graph, Generator& gen,
                          Attention* attention) {
  return forward(x, graph, Tensor(), gen, attention);
}

Tensor GATv2Conv::forward(const Features& x, const Graph& graph, const Tensor& edge_attr, Generator& gen,
                          Attention* attention) {
  const int64_t N = graph.num_nodes(), H = options_.heads, F = options_.out_channels;
  check_attention_input("GATv2Conv", x, graph, options_.in_channels);
  const Graph& g = options_.add_self_loops ? looped_.of(graph) : graph;
  const Tensor attr = attended_edge_attr("GATv2Conv", lin_edge.get(), edge_attr, graph, g, options_.add_self_loops,
                                         options_.fill_value);  // (E', D) or undefined
  const Tensor xe = attr.defined() ? ops::reshape(lin_edge->forward(attr), {g.num_edges(), H, F})
                                   : Tensor();  // (E', H, F) or undefined

  const Tensor xl = ops::reshape(lin_l->forward(x), {N, H, F});  // (N, H, F): sources, values
  const Tensor xr = options_.share_weights ? xl : ops::reshape(lin_r->forward(x), {N, H, F});  // (N, H, F)
  const DropoutKey key = is_training() && options_.dropout > 0.0
                             ? gen.dropout_key(static_cast<float>(options_.dropout))
                             : DropoutKey{};
  Tensor out = ops::gatv2_attention_aggregate(g, xl, xr, att, options_.negative_slope, key, xe);  // (N, H, F)
  out = combine_heads(out, options_.concat, res ? res->forward(x) : Tensor(), bias);  // (N, out_features)

  if (attention)
    *attention = {g, ops::csr_softmax(g, ops::gatv2_edge_scores(g, xl.detach(), xr.detach(), att.detach(),
                                                                options_.negative_slope,
                                                                xe.defined() ? xe.detach() : Tensor()))};
  return out;
}

}  // namespace gat
