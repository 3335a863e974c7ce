#include "gat/layers/gat_conv.h"

#include "gat/framework/init.h"
#include "gat/framework/ops/csr_softmax_aggregate.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/head_dot.h"
#include "gat/framework/ops/reshape.h"

namespace gat {

GATConv::GATConv(const GATConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, F = options.out_channels, H = options.heads;
  check_attention_options("GATConv", in, F, H, options.dropout);
  lin = register_module("lin", std::make_shared<Linear>(in, H * F, false, init, options.dtype));
  // PyG's glorot on att (1, H, F) uses fan_in = H, fan_out = F.
  att_src = register_parameter("att_src", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  att_dst = register_parameter("att_dst", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({out_features()}, options.dtype));
  if (options.residual)
    res = register_module("res", std::make_shared<Linear>(in, out_features(), false, init, options.dtype));
}

int64_t GATConv::out_features() const {
  return options_.concat ? options_.heads * options_.out_channels : options_.out_channels;
}

Tensor GATConv::forward(const Features& x, const Graph& graph, Generator& gen,
                        Attention* attention) {
  const int64_t N = graph.num_nodes(), H = options_.heads, F = options_.out_channels;
  check_attention_input("GATConv", x, graph, options_.in_channels);
  const Graph& g = options_.add_self_loops ? looped_.of(graph) : graph;

  Tensor wh = ops::reshape(lin->forward(x), {N, H, F});  // (N, H, F)
  Tensor el = ops::head_dot(wh, att_src);                 // (N, H)
  Tensor er = ops::head_dot(wh, att_dst);                 // (N, H)
  const DropoutKey key = is_training() && options_.dropout > 0.0
                             ? gen.dropout_key(static_cast<float>(options_.dropout))
                             : DropoutKey{};
  Tensor values = wh;  // (N, H, F)
  if (is_training() && options_.value_dropout > 0.0)
    values = ops::dropout(wh, gen.dropout_key(static_cast<float>(options_.value_dropout)));
  Tensor out = ops::gat_attention_aggregate(g, el, er, values, options_.negative_slope, key);  // (N, H, F)
  out = combine_heads(out, options_.concat, res ? res->forward(x) : Tensor(), bias);  // (N, out_features)

  if (attention)
    *attention = {g, ops::csr_softmax(g, ops::gat_edge_scores(g, el.detach(), er.detach(),
                                                              options_.negative_slope))};
  return out;
}

}  // namespace gat
