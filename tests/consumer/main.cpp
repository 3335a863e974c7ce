// One GATConv forward and backward on a four-node graph, through gat's installed headers, beside
// the consumer's own framework/module.h. Prints the loss and exits 0 when the gradients are there.
#include <gat/framework/graph.h>
#include <gat/framework/ops/reduce.h>
#include <gat/layers/gat_conv.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "framework/module.h"

int main() {
  const consumer::Module own;
  const gat::Graph graph = gat::Graph::from_edges(4, {0, 1, 2, 3, 0}, {1, 2, 3, 0, 2});
  gat::Generator init(0), dropout(1);
  gat::GATConvOptions options;
  options.in_channels = 3;
  options.out_channels = 2;
  options.heads = 2;
  auto conv = std::make_shared<gat::GATConv>(options, init);
  const gat::Tensor x = gat::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3});
  const gat::Tensor loss = gat::ops::sum(conv->forward(x, graph, dropout));
  loss.backward();
  const float value = loss.to_vector<float>()[0];
  const bool ok = std::isfinite(value) && conv->lin->weight.grad().defined() && own.answer() == 42;
  std::printf("consumer: loss %.6f, gradients %s\n", static_cast<double>(value), ok ? "present" : "MISSING");
  return ok ? 0 : 1;
}
