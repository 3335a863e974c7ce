#include "gat/train/sampled_training.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/detail/clock.h"
#include "gat/framework/neighbor_sampler.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/index_rows.h"
#include "gat/framework/optim.h"
#include "gat/train/early_stopping.h"

namespace gat {

namespace {

using detail::Clock;
using detail::ms_since;

// The positions 0..n-1: the index of every row of a batch's logits.
Tensor all_rows(int64_t n, Device device) {
  std::vector<int32_t> rows(static_cast<size_t>(n));
  for (size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<int32_t>(k);
  return Tensor::from_vector(rows, {n}, device);
}

}  // namespace

void sampled_step(GAT& model, const MiniBatch& batch, Optimizer& optimizer, Generator& gen,
                  StepTotals& totals) {
  model.train();
  optimizer.zero_grad();
  // Made before the forward is queued: on CUDA its copy waits for the main stream, which would
  // otherwise hold the host until the forward has run, between its launches and the backward's.
  const Tensor rows = all_rows(batch.y.size(0), batch.y.device());                    // (B,)
  const Tensor logits = model.forward(batch.x, batch.blocks, gen, batch.edge_attrs);  // (B, C)
  ops::masked_cross_entropy(logits, batch.y, rows).backward();
  optimizer.step();
  optimizer.zero_grad();
  const std::vector<double> m =
      ops::classification_metrics(logits.detach(), batch.y, {rows}).to_vector<double>();  // (1, 3)
  const auto b = static_cast<double>(logits.size(0));
  totals.loss_sum += m[0] * b;
  totals.correct += m[1];
  totals.rows += b;
}

Tensor layerwise_inference(GAT& model, const Graph& graph, const Tensor& x, const Tensor& edge_attr,
                           int64_t batch_size, Device device) {
  check_in_range("layerwise_inference: batch_size", batch_size, NeighborLoaderOptions::kBatchSizeRange);
  autograd::NoGradGuard no_grad;
  model.eval();
  Generator none = Generator::refusing("layerwise_inference");
  const int64_t n = graph.num_dst_nodes();
  if (batch_size >= n) {
    // One chunk of every node: its block would be the graph itself, bit for bit (every row's
    // in-edges in the graph's order, local ids the global ones), so each layer runs on the graph,
    // copied to the device once, and layer 1's outputs stay there for layer 2. Its self loops are
    // added here, once, on the host: each layer would otherwise add them to the device graph,
    // through the host.
    const auto [looped, looped_attr] = with_self_loops(graph, edge_attr);
    const Graph on_device = looped.to(device);
    const Tensor attr = looped_attr.defined() ? looped_attr.to(device) : Tensor();
    Tensor h = x.to(device);  // (N, width) the current layer's inputs
    for (int layer = 1; layer <= GAT::kLayers; ++layer)
      h = model.forward_layer(layer, h, on_device, none, attr);
    return h.to(Device::cpu);  // (N, num_classes)
  }
  const NeighborSampler full(graph, NeighborSamplerOptions{{-1}, false, 0});  // every in-edge
  Tensor h = x;  // (N, width) the current layer's inputs, on the host
  for (int layer = 1; layer <= GAT::kLayers; ++layer) {
    Tensor out;  // (N, layer's width) on the host, made with the first chunk
    for (int64_t first = 0; first < n; first += batch_size) {
      const int64_t last = std::min(n, first + batch_size);
      std::vector<int32_t> nodes(static_cast<size_t>(last - first));
      for (int64_t k = first; k < last; ++k) nodes[static_cast<size_t>(k - first)] = static_cast<int32_t>(k);
      const SampledBlock block = std::move(full.sample(nodes, 0).blocks.front());
      const Tensor sources =
          Tensor::from_vector(block.src_nodes, {static_cast<int64_t>(block.src_nodes.size())});
      const Tensor attr =
          edge_attr.defined()
              ? ops::index_rows(edge_attr, Tensor::from_vector(block.edge_ids,
                                                               {static_cast<int64_t>(block.edge_ids.size())}))
                    .to(device)
              : Tensor();
      const Tensor chunk = model
                               .forward_layer(layer, ops::index_rows(h, sources).to(device),
                                              block.graph.to(device), none, attr)
                               .to(Device::cpu);  // (last - first, width)
      if (!out.defined())
        out = Tensor::empty({n, chunk.size(1)}, chunk.dtype(), Device::cpu, "layerwise_inference");
      Tensor rows = out.rows(first, last);
      rows.copy_(chunk);
    }
    h = out;
  }
  return h;  // (N, num_classes)
}

TrainResult train_node_classifier_sampled(GAT& model, const Dataset& data, const TrainOptions& options,
                                          const SampledTraining& sampled, Device device, Generator& gen,
                                          const std::function<void(const EpochStats&)>& on_epoch) {
  options.validate();
  GAT_CHECK(!options.loss,
            "sampled training: TrainOptions::loss is not supported (the loss is the batch's "
            "mean cross-entropy)");
  GAT_CHECK(options.checkpoints.path.empty() && options.checkpoints.resume.empty(),
            "sampled training writes and resumes no run checkpoints (the loader's position is not saved)");
  GAT_CHECK(static_cast<int64_t>(sampled.loader.fanouts.size()) == GAT::kLayers,
            "sampled training: ", sampled.loader.fanouts.size(), " fanouts for a model of ", GAT::kLayers,
            " layers");
  GAT_CHECK(data.x.device() == Device::cpu && data.graph.device() == Device::cpu,
            "sampled training: the dataset must be on the host (batches are copied to the device)");
  NeighborLoader loader(data.graph, data.x, data.y, data.edge_attr, data.train_index.to_vector<int32_t>(),
                        sampled.loader, device);
  EpochLoop loop(model, options);
  double step_ms_total = 0;
  int64_t steps = 0;
  loader.start_epoch(0);
  for (int64_t epoch = 1; epoch <= options.max_epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    StepTotals totals;
    while (std::optional<MiniBatch> batch = loader.next())
      sampled_step(model, *batch, *loop.optimizer, gen, totals);
    // The next epoch's first batches are made during this one's evaluation (its loader epoch is
    // `epoch`, counted from 0), not after it: with few batches an epoch (Cora's one) the first
    // step would otherwise wait for its batch.
    if (epoch < options.max_epochs) loader.start_epoch(epoch);
    EpochStats stats;
    stats.epoch = epoch;
    stats.step_ms = ms_since(start);
    step_ms_total += stats.step_ms;
    steps += loader.num_batches();
    stats.loss = totals.loss_sum / totals.rows;
    stats.train_acc = totals.correct / totals.rows;
    const Tensor logits =
        layerwise_inference(model, data.graph, data.x, data.edge_attr, sampled.inference_batch_size, device);
    const EarlyStopping::Decision decision = loop.judge(stats, evaluate_logits(logits, data));
    stats.ms = ms_since(start);
    if (on_epoch) on_epoch(stats);
    if (decision.stop) break;
  }
  loop.result.train_step_ms = step_ms_total / static_cast<double>(steps);
  restore_best(loop.result, data.x, options.lr, loop.params, loop.best_params);
  model.eval();
  return loop.result;
}

}  // namespace gat
