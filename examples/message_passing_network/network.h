// A node classifier of three different message-passing layers, written with nothing but gat's
// installed headers, and the loop that trains it. message_passing_network.cpp runs it on Cora;
// tests/test_example_network.cpp checks that it reaches 80% test accuracy there.
//
// The network, for N nodes of F features and C classes (Cora: 2708, 1433, 7):
//   1. x (N, F) through dropout and a Linear projection -> (N, 64);
//   2. scaled and shifted by an Embedding of each node's degree bucket (FiLM): a hub and a leaf
//      with the same words start apart. The buckets come from the in-degrees (scatter_add over
//      the edges) relative to the graph's mean in-degree (global_mean_pool, broadcast back);
//   3. a Sequential that takes the graph: GCNConv (N, 64) -> ELU -> SAGEConv (N, 64) -> ELU ->
//      GATConv with one head -> logits (N, C), with dropout before each layer.
// Adam trains it with two parameter groups (no weight decay on biases and the embedding) and a
// learning rate halved when the validation loss stalls. The parameters of the epoch with the best
// validation accuracy are kept in memory and restored for the test.
#pragma once

#include <gat/datasets/dataset.h>
#include <gat/framework/autograd.h>
#include <gat/framework/ops/accuracy.h>
#include <gat/framework/ops/arithmetic.h>
#include <gat/framework/ops/cross_entropy.h>
#include <gat/framework/ops/global_pool.h>
#include <gat/framework/ops/narrow.h>
#include <gat/framework/ops/reshape.h>
#include <gat/framework/ops/scatter_add.h>
#include <gat/framework/ops/unary.h>
#include <gat/framework/optim.h>
#include <gat/layers/activation.h>
#include <gat/layers/dropout.h>
#include <gat/layers/embedding.h>
#include <gat/layers/gat_conv.h>
#include <gat/layers/gcn_conv.h>
#include <gat/layers/linear.h>
#include <gat/layers/sage_conv.h>
#include <gat/layers/sequential.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace example {

using namespace gat;

// What the network reads of the graph besides the features, computed once before training.
struct GraphInputs {
  Features x;            // (N, F), sparse for bag-of-words features
  Graph graph;           // the edges j -> i, on x's device
  Tensor degree_bucket;  // (N,) i32 in [0, kDegreeBuckets)
};

constexpr int64_t kHidden = 64;
constexpr int64_t kDegreeBuckets = 16;
constexpr double kDropout = 0.6;

// Each node's in-degree relative to its graph's mean in-degree, in quarters, clamped to the last
// bucket. Cora's mean is 3.9, so a bucket is about one degree up to 15; its hubs (up to 168) share
// the last. Relative degrees mean the same on a sparse graph and a dense one.
inline GraphInputs graph_inputs(const Dataset& data) {
  const Graph& graph = data.graph;
  const int64_t n = graph.num_nodes();
  // A 1 per edge, added into its destination's row: the in-degrees.
  const Tensor ones = Tensor::full({graph.num_edges(), 1}, 1.0, DType::f32, graph.device());  // (E, 1)
  const Tensor degree = ops::scatter_add(ones, graph.edge_dst(), n);                          // (N, 1)
  // The graph-level mean, one row per graph: Cora is one graph, every node in graph 0.
  const Tensor batch = Tensor::zeros({n}, DType::i32, graph.device());  // (N,)
  const Tensor mean_degree = ops::global_mean_pool(degree, batch);      // (1, 1)
  const Tensor quarters = 4.0 * degree / mean_degree;  // (N, 1) / (1, 1): broadcast over the nodes
  const Tensor bucket = ops::clamp(ops::reshape(quarters, {n}), 0.0, double(kDegreeBuckets - 1));  // (N,)
  return {Features::choose(data.x), graph, bucket.to(DType::i32)};  // to(i32) rounds down
}

class MessagePassingNetwork : public Module {
 public:
  MessagePassingNetwork(int64_t in_features, int64_t classes, Generator& init) {
    input_dropout = register_module("input_dropout", std::make_shared<Dropout>(kDropout));
    in_proj = register_module("in_proj", std::make_shared<Linear>(in_features, kHidden, true, init));
    // A scale and a shift per degree bucket, side by side in one row of 2 x 64. The table starts
    // at 0 (not torch's N(0, 1)), so the degrees change nothing until training finds them useful.
    degree_embedding =
        register_module("degree_embedding", std::make_shared<Embedding>(kDegreeBuckets, 2 * kHidden, init));
    degree_embedding->weight.zero_();

    GCNConvOptions gcn;
    gcn.in_channels = kHidden;
    gcn.out_channels = kHidden;
    SAGEConvOptions sage;
    sage.in_channels = kHidden;
    sage.out_channels = kHidden;
    GATConvOptions gat;  // the output layer, one head, as the GAT paper's on Cora
    gat.in_channels = kHidden;
    gat.out_channels = classes;
    gat.dropout = kDropout;  // on the attention weights
    // Sequential calls each step with what it takes: GCNConv and SAGEConv get (h, graph), GATConv
    // (h, graph, gen) for its attention dropout, the dropouts (h, gen), ELU h alone.
    stack = register_module("stack", std::make_shared<Sequential>());
    stack->add(std::make_shared<Dropout>(kDropout))
        .add(std::make_shared<GCNConv>(gcn, init))  // (N, 64)
        .add(std::make_shared<ELU>())
        .add(std::make_shared<Dropout>(kDropout))
        .add(std::make_shared<SAGEConv>(sage, init))  // (N, 64)
        .add(std::make_shared<ELU>())
        .add(std::make_shared<Dropout>(kDropout))
        .add(std::make_shared<GATConv>(gat, init));  // (N, C)
  }

  // -> logits (N, C). In eval mode nothing is drawn from gen.
  Tensor forward(const GraphInputs& in, Generator& gen) const {
    // The projection takes its input dropout inside the sparse product.
    Tensor h = in_proj->forward(in.x, input_dropout->key(gen));  // (N, 64)
    // FiLM (Perez et al. 2018) by degree: the embedding row split into its scale and its shift.
    const Tensor film = degree_embedding->forward(in.degree_bucket);  // (N, 128)
    h = h * (1.0 + ops::narrow(film, 1, 0, kHidden)) + ops::narrow(film, 1, kHidden, kHidden);
    return stack->forward(h, in.graph, gen);  // (N, C)
  }

  std::shared_ptr<Dropout> input_dropout;
  std::shared_ptr<Linear> in_proj;
  std::shared_ptr<Embedding> degree_embedding;
  std::shared_ptr<Sequential> stack;
};

struct RunOptions {
  int64_t epochs = 200;
  uint64_t seed = 0;
  std::FILE* log = stdout;  // a line every 25 epochs; nullptr for none
};

struct RunResult {
  int64_t best_epoch = 0;  // the epoch of the best validation accuracy (then the lower loss)
  double val_loss = 0, val_acc = 0, test_acc = 0;  // of the parameters of that epoch
};

inline RunResult train(const Dataset& data, const RunOptions& options) {
  const GraphInputs inputs = graph_inputs(data);
  Generator init(options.seed), dropout(options.seed + 1);
  MessagePassingNetwork model(data.num_features(), data.num_classes, init);
  model.to(data.x.device());

  // Weight decay (5e-4, as for GCN and GAT on Cora) pulls weights toward 0. A bias or an
  // embedding row has no such reason to be small, so they form a second group without it.
  std::vector<Tensor> decayed, plain;
  for (const auto& [name, p] : model.named_parameters())
    (name.find("bias") != std::string::npos || name.find("embedding") != std::string::npos ? plain : decayed)
        .push_back(p);
  AdamOptions adam;
  adam.lr = 0.01;
  adam.weight_decay = 5e-4;
  Adam optimizer({ParamGroup(decayed), ParamGroup(plain, std::nullopt, 0.0)}, adam);
  ReduceLROnPlateauOptions plateau;  // halve both groups' rates after 20 epochs without a better loss
  plateau.factor = 0.5;
  plateau.patience = 20;
  plateau.min_lr = 1e-4;
  ReduceLROnPlateau schedule(optimizer, plateau);

  RunResult result;
  result.val_loss = 1e300;
  std::map<std::string, Tensor> best;  // a copy of the parameters of the best epoch
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    model.train();
    const Tensor loss = ops::masked_cross_entropy(model.forward(inputs, dropout), data.y, data.train_index);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();

    model.eval();
    autograd::NoGradGuard no_grad;
    const Tensor logits = model.forward(inputs, dropout);
    const double val_loss = ops::masked_cross_entropy(logits, data.y, data.val_index).item();
    schedule.step(val_loss);
    const double val_acc = ops::accuracy(logits, data.y, data.val_index);
    if (val_acc > result.val_acc || (val_acc == result.val_acc && val_loss < result.val_loss)) {
      result = {epoch, val_loss, val_acc, 0.0};
      best = model.state_dict();
    }
    if (options.log && epoch % 25 == 0)
      std::fprintf(options.log, "epoch %4lld  loss %.4f  val_loss %.4f  lr %.5f\n",
                   static_cast<long long>(epoch), loss.item(), val_loss, optimizer.lr(0));
  }

  model.load_state_dict(best);
  model.eval();
  autograd::NoGradGuard no_grad;
  result.test_acc = ops::accuracy(model.forward(inputs, dropout), data.y, data.test_index);
  return result;
}

}  // namespace example
