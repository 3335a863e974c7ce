#include "gat/models/inductive_gat.h"

namespace gat {

InductiveGAT::InductiveGAT(const InductiveGATConfig& config, Generator& init) : config_(config) {
  auto layer = [&](int64_t in, int64_t out, int64_t heads, bool hidden) {
    GATConvOptions o;
    o.in_channels = in;
    o.out_channels = out;
    o.heads = heads;
    o.concat = hidden;
    o.residual = config.residual;
    o.elu = hidden;
    o.dtype = config.dtype;
    return std::make_shared<GATConv>(o, init);
  };
  const int64_t width = config.hidden * config.heads;
  conv1 = register_module("conv1", layer(config.in_features, config.hidden, config.heads, true));
  conv2 = register_module("conv2", layer(width, config.hidden, config.heads, true));
  conv3 = register_module("conv3", layer(width, config.num_labels, config.output_heads, false));
}

Tensor InductiveGAT::forward(const Tensor& x, const Graph& graph) {
  Generator none = Generator::refusing("InductiveGAT (no dropout)");
  const Tensor h1 = conv1->forward(x, graph, none);  // (N, hidden * heads), after ELU
  const Tensor h2 = conv2->forward(h1, graph, none);
  return conv3->forward(h2, graph, none);  // (N, num_labels)
}

}  // namespace gat
