#include "gat/layers/sage_conv.h"

#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/reduce.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/ops/unary.h"

namespace gat {

SAGEConv::SAGEConv(const SAGEConvOptions& options, Generator& init) : options_(options) {
  const int64_t in = options.in_channels, out = options.out_channels;
  GAT_CHECK(in > 0 && out > 0, "SAGEConv: in_channels ", in, " and out_channels ", out, " must be positive");
  GAT_CHECK(options.dst_in_channels >= 0, "SAGEConv: dst_in_channels ", options.dst_in_channels,
            " must be positive (the destinations' width: in_channels a pair) or 0 (one width)");
  const int64_t dst_in = options.dst_in_channels > 0 ? options.dst_in_channels : in;
  const auto pyg_linear = [&](int64_t from, int64_t to, bool with_bias) {
    return std::make_shared<Linear>(from, to, with_bias, init, options.dtype, LinearBiasInit::fan_in,
                                    LinearWeightInit::fan_in);
  };
  if (options.project) lin = register_module("lin", pyg_linear(in, in, true));
  lin_l = register_module("lin_l", pyg_linear(in, out, options.bias));
  if (options.root_weight) lin_r = register_module("lin_r", pyg_linear(dst_in, out, false));
}

Tensor SAGEConv::forward_sides(const Tensor& x_src, const Tensor* x_dst, const Graph& graph) {
  check_message_inputs("SAGEConv", x_src, x_dst, graph, options_.in_channels, options_.dst_in_channels);
  const Tensor sources = lin ? ops::relu(lin->forward(x_src)) : x_src;      // (Ns, in)
  Tensor out = lin_l->forward(mean_neighbours(sources, plans_.of(graph)));  // (Nd, out)
  if (lin_r) out = out + lin_r->forward(x_dst ? *x_dst : x_src);
  if (!options_.normalize) return out;
  const Tensor squares = ops::reshape(ops::sum(out * out, 1), {out.size(0), 1});  // (Nd, 1)
  return out / ops::sqrt(ops::maximum(squares, 1e-24));
}

}  // namespace gat
