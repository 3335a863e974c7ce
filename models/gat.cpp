#include "gat/models/gat.h"

#include "gat/framework/ops/activations.h"

namespace gat {

GAT::GAT(const GATConfig& config, Generator& init) : config_(config) {
  GAT_CHECK(config.in_features > 0 && config.num_classes > 0, "GAT: in_features ",
            config.in_features, " and num_classes ", config.num_classes, " must be positive");
  dropout = register_module("dropout", std::make_shared<Dropout>(config.dropout));
  GATConvOptions first;
  first.in_channels = config.in_features;
  first.out_channels = config.hidden;
  first.heads = config.heads;
  first.concat = true;
  first.negative_slope = config.negative_slope;
  first.dropout = config.dropout;
  first.value_dropout = config.value_dropout;
  first.dtype = config.dtype;
  conv1 = register_module("conv1", std::make_shared<GATConv>(first, init));
  GATConvOptions second = first;
  second.in_channels = config.hidden * config.heads;
  second.out_channels = config.num_classes;
  second.heads = config.output_heads;
  second.concat = false;
  conv2 = register_module("conv2", std::make_shared<GATConv>(second, init));
}

Tensor GAT::forward(const Features& x, const Graph& graph, Generator& gen) {
  Tensor h = conv1->forward(dropout->forward(x, gen), graph, gen);  // (N, heads * hidden)
  h = ops::elu(h);
  return conv2->forward(dropout->forward(h, gen), graph, gen);  // (N, num_classes)
}

}  // namespace gat
