#include "gat/layers/gat_conv.h"

#include <cmath>

#include "gat/framework/autograd.h"
#include "gat/framework/init.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/matmul.h"
#include "gat/framework/ops/reshape.h"
#include "gat/layers/dropout.h"

namespace gat {

GATConv::GATConv(const GATConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, F = options.out_channels, H = options.heads;
  check_attention_options("GATConv", options);
  check_in_range("GATConv: input_dropout", options.input_dropout, kDropoutRateRange);
  check_in_range("GATConv: value_dropout", options.value_dropout, kDropoutRateRange);
  check_in_range("GATConv: output_dropout", options.output_dropout, kDropoutRateRange);
  GAT_CHECK(options.elu || options.output_dropout == 0.0, "GATConv: output_dropout ", options.output_dropout,
            " needs elu (the dropout follows the output activation)");
  GAT_CHECK(!options.elu || (options.elu_alpha >= 0.0 && std::isfinite(options.elu_alpha)),
            "GATConv: elu_alpha ", options.elu_alpha, " is negative or not finite");
  const int64_t dst_in = options.dst_in_channels > 0 ? options.dst_in_channels : in;
  if (options.dst_in_channels > 0) {
    lin_src = register_module("lin_src", std::make_shared<Linear>(in, H * F, false, init, options.dtype));
    lin_dst = register_module("lin_dst", std::make_shared<Linear>(dst_in, H * F, false, init, options.dtype));
  } else {
    lin = register_module("lin", std::make_shared<Linear>(in, H * F, false, init, options.dtype));
  }
  if (options.edge_dim > 0)
    lin_edge = register_module("lin_edge",
                               std::make_shared<Linear>(options.edge_dim, H * F, false, init, options.dtype));
  // PyG's glorot on att (1, H, F) uses fan_in = H, fan_out = F.
  att_src = register_parameter("att_src", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  att_dst = register_parameter("att_dst", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (lin_edge)
    att_edge = register_parameter("att_edge", init::glorot_uniform({H, F}, H, F, init, options.dtype));
  if (options.bias) bias = register_parameter("bias", init::zeros({out_features()}, options.dtype));
  if (options.residual)
    res =
        register_module("res", std::make_shared<Linear>(dst_in, out_features(), false, init, options.dtype));
}

int64_t GATConv::out_features() const {
  return options_.concat ? options_.heads * options_.out_channels : options_.out_channels;
}

Tensor GATConv::edge_scores(const Graph& graph, const Graph& g, const Tensor& edge_attr) {
  const Tensor attr =
      attended_edge_attr("GATConv", lin_edge.get(), edge_attr, graph, g, options_.add_self_loops,
                         options_.fill_value);  // (E', D) or undefined
  if (!attr.defined()) return Tensor();
  // ee = attr (We . att_edge): (E', D) x (D, H).
  const int64_t D = options_.edge_dim, H = options_.heads, F = options_.out_channels;
  const Tensor edge_att = ops::head_dot(ops::reshape(lin_edge->weight, {D, H, F}), att_edge);  // (D, H)
  return ops::matmul(attr, edge_att);                                                          // (E', H)
}

bool GATConv::terms_from_projection(const Linear& proj) const {
  return proj.in_features() >= options_.heads * options_.out_channels;
}

// (x W) . att equals x (W . att), W . att the (in, H) fold of the weight viewed (in, H, F). When
// x is narrower than the projection (in < H*F) the fold's GEMM reads fewer bytes than head_dot
// over wh, and its backward needs x (which the projection keeps anyway), not wh: at scale the
// (N, H*F) wh then dies with the forward unless the aggregate keeps it as its values.
Tensor GATConv::attention_term(const Linear& proj, const Features& x, const Tensor& wh,
                               const Tensor& att) const {
  const int64_t in = proj.in_features(), H = options_.heads, F = options_.out_channels;
  if (terms_from_projection(proj))
    return ops::head_dot(wh.defined() ? wh : ops::reshape(proj.forward(x), {x.rows(), H, F}),
                         att);  // (rows, H)
  return features_matmul(x,
                         ops::head_dot(ops::reshape(proj.weight, {in, H, F}), att));  // (rows, in) x (in, H)
}

Tensor GATConv::forward_sides(const Features& x_src, const Features* x_dst, const Graph& graph,
                              const Tensor& edge_attr, Generator& gen, Attention* attention) {
  const int64_t Ns = graph.num_src_nodes(), H = options_.heads, F = options_.out_channels;
  check_attention_inputs("GATConv", x_src, x_dst, graph, options_.in_channels, options_.dst_in_channels);
  const Graph& g = options_.add_self_loops ? looped_.of(graph) : graph;
  // One graph's nodes through one projection, el and er read from it: the fused op, whose
  // backward writes d wh in one pass (the fold below reads fewer bytes when in < H*F).
  const bool projected = lin && !x_dst && terms_from_projection(*lin);
  // A dense x narrower than the projection: el, er and the values straight from x and the weight,
  // the (N, H*F) projection never stored (linear_head_dot.h).
  const bool linear = lin && !x_dst && !projected && !x_src.is_sparse();

  // The input dropout draws first, as a Dropout layer before this one would. It goes into the
  // projection's product where only that product reads x: sparse x, the projected op, no residual.
  auto input_key = [&] {
    return is_training() && options_.input_dropout > 0.0
               ? gen.dropout_key(static_cast<float>(options_.input_dropout))
               : DropoutKey{};
  };
  const DropoutKey src_key = input_key(), dst_key = x_dst ? input_key() : DropoutKey{};
  const bool input_in_projection = src_key.active() && projected && x_src.is_sparse() && !res;
  const Features xs = input_in_projection ? x_src : dropout_features(x_src, src_key);
  const Features xd = x_dst ? dropout_features(*x_dst, dst_key) : xs;
  const Tensor ee = edge_scores(graph, g, edge_attr);  // (E', H) or undefined

  const DropoutKey key = is_training() && options_.dropout > 0.0
                             ? gen.dropout_key(static_cast<float>(options_.dropout))
                             : DropoutKey{};
  const DropoutKey value_key = is_training() && options_.value_dropout > 0.0
                                   ? gen.dropout_key(static_cast<float>(options_.value_dropout))
                                   : DropoutKey{};
  // The output activation's dropout draws after the layer's own, as a dropout after the layer would.
  const ops::OutputActivation activation{options_.elu, options_.elu_alpha,
                                         is_training() && options_.output_dropout > 0.0
                                             ? gen.dropout_key(static_cast<float>(options_.output_dropout))
                                             : DropoutKey{}};
  // Concatenated heads (or a single head) without a residual take the bias inside the aggregate:
  // its output, plus the bias, is then both what the layer returns and what the backward keeps.
  // The activation follows it there (and the output is then the only (N, H*F) tensor kept).
  const bool output_in_aggregate = (options_.concat || H == 1) && !res;
  const bool bias_in_aggregate = output_in_aggregate && bias.defined();
  const Tensor aggregate_bias = bias_in_aggregate ? bias : Tensor();  // (H F)
  const ops::OutputActivation aggregate_activation =
      output_in_aggregate ? activation : ops::OutputActivation{};
  // One x through lin: one projection for both sides.
  const Tensor wh =
      linear ? Tensor()
             : ops::reshape((lin ? *lin : *lin_src).forward(xs, input_in_projection ? src_key : DropoutKey{}),
                            {Ns, H, F});  // (Ns, H, F)
  Tensor el, er, out;
  if (linear) {
    out = ops::gat_linear_attention(g, xs.dense(), lin->weight, att_src, att_dst, options_.negative_slope,
                                    key, value_key, ee, aggregate_bias, aggregate_activation);  // (N, H, F)
    if (attention) {  // el and er again, for the weights only
      autograd::NoGradGuard no_grad;
      el = attention_term(*lin, xs, wh, att_src);
      er = attention_term(*lin, xs, wh, att_dst);
    }
  } else if (projected) {
    out = ops::gat_projected_attention(g, wh, att_src, att_dst, options_.negative_slope, key, value_key, ee,
                                       aggregate_bias, aggregate_activation);  // (N, H, F)
    if (attention) {  // el and er again, for the weights only
      autograd::NoGradGuard no_grad;
      el = ops::head_dot(wh, att_src);
      er = ops::head_dot(wh, att_dst);
    }
  } else {
    const Tensor wh_dst =
        !x_dst && lin ? wh : Tensor();  // (Nd, H, F), else made by attention_term if it needs it
    el = attention_term(lin ? *lin : *lin_src, xs, wh, att_src);                  // (Ns, H)
    er = attention_term(lin ? *lin : *lin_dst, xd, wh_dst, att_dst);              // (Nd, H)
    const Tensor values = value_key.active() ? ops::dropout(wh, value_key) : wh;  // (Ns, H, F)
    out = ops::gat_attention_aggregate(g, el, er, values, options_.negative_slope, key, ee, aggregate_bias,
                                       aggregate_activation);  // (Nd, H, F)
  }
  out = combine_heads(out, options_.concat, res ? res->forward(xd) : Tensor(),
                      bias_in_aggregate ? Tensor() : bias);  // (Nd, out_features)
  if (activation.elu && !output_in_aggregate)
    out = ops::elu_dropout(out, activation.alpha, activation.dropout);

  if (attention)
    *attention = {
        g, ops::csr_softmax(g, ops::gat_edge_scores(g, el.detach(), er.detach(), options_.negative_slope,
                                                    ee.defined() ? ee.detach() : Tensor()))};
  return out;
}

}  // namespace gat
