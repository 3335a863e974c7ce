#include "gat/train/inductive_training.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "gat/framework/autograd.h"
#include "gat/framework/detail/clock.h"
#include "gat/framework/ops/losses.h"
#include "gat/framework/ops/micro_f1.h"
#include "gat/framework/optim.h"
#include "gat/train/early_stopping.h"

namespace gat {

namespace {

using detail::Clock;
using detail::ms_since;

// A batch on the device, its graph looped once for the three layers.
struct DeviceBatch {
  Tensor x, y;  // (N, F), (N, C)
  Graph looped;
};

DeviceBatch to_device(const std::vector<const GraphData*>& graphs, Device device) {
  const GraphBatch batch = batch_graphs(graphs);
  return {batch.data.x.to(device), batch.data.y.to(device), batch.data.graph.with_self_loops().to(device)};
}

// The graphs in batches of batch_size, in the order of `order`.
std::vector<std::vector<const GraphData*>> batches_of(const std::vector<GraphData>& graphs,
                                                      const std::vector<size_t>& order, int64_t batch_size) {
  std::vector<std::vector<const GraphData*>> out;
  for (size_t k = 0; k < order.size(); k += static_cast<size_t>(batch_size)) {
    out.emplace_back();
    for (size_t j = k; j < std::min(order.size(), k + static_cast<size_t>(batch_size)); ++j)
      out.back().push_back(&graphs[order[j]]);
  }
  return out;
}

// The loss sum (mean times elements), micro-F1 counts and elements of batches so far.
struct Totals {
  double loss_sum = 0, elements = 0;
  std::vector<double> counts = std::vector<double>(4, 0.0);
  void add(const Tensor& logits, const Tensor& y, double loss) {
    const auto n = static_cast<double>(logits.numel());
    loss_sum += loss * n;
    elements += n;
    const std::vector<double> c = ops::micro_f1_counts(logits, y).to_vector<double>();
    for (size_t k = 0; k < 4; ++k) counts[k] += c[k];
  }
  SplitMetrics metrics() const { return {loss_sum / elements, ops::micro_f1_from_counts(counts)}; }
};

SplitMetrics evaluate_batches(InductiveGAT& model, const std::vector<DeviceBatch>& batches) {
  autograd::NoGradGuard no_grad;
  model.eval();
  Totals totals;
  for (const DeviceBatch& b : batches) {
    const Tensor logits = model.forward(b.x, b.looped);
    totals.add(logits, b.y, ops::binary_cross_entropy_with_logits(logits, b.y).item());
  }
  return totals.metrics();
}

std::vector<DeviceBatch> device_batches(const std::vector<GraphData>& graphs, int64_t batch_size,
                                        Device device) {
  std::vector<size_t> order(graphs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<DeviceBatch> out;
  for (const auto& batch : batches_of(graphs, order, batch_size)) out.push_back(to_device(batch, device));
  return out;
}

void check_split(const char* split, const std::vector<GraphData>& graphs, const InductiveGATConfig& config) {
  GAT_CHECK(!graphs.empty(), "train_inductive: the ", split, " split has no graphs");
  for (size_t k = 0; k < graphs.size(); ++k)
    GAT_CHECK(graphs[k].x.size(1) == config.in_features && graphs[k].y.dim() == 2 &&
                  graphs[k].y.size(1) == config.num_labels,
              "train_inductive: ", split, " graph ", k, " has x ", shape_str(graphs[k].x.shape()), " and y ",
              shape_str(graphs[k].y.shape()), ", the model takes ", config.in_features,
              " features and gives ", config.num_labels, " labels");
}

}  // namespace

SplitMetrics evaluate_graphs(InductiveGAT& model, const std::vector<GraphData>& graphs, int64_t batch_size,
                             Device device) {
  check_in_range("evaluate_graphs: batch_size", batch_size, InductiveTraining::kBatchSizeRange);
  check_split("evaluated", graphs, model.config());
  return evaluate_batches(model, device_batches(graphs, batch_size, device));
}

TrainResult train_inductive(InductiveGAT& model, const MultiGraphDataset& data, const TrainOptions& options,
                            const InductiveTraining& inductive, Device device,
                            const std::function<void(const EpochStats&)>& on_epoch) {
  options.validate();
  check_in_range("train_inductive: batch_size", inductive.batch_size, InductiveTraining::kBatchSizeRange);
  GAT_CHECK(!options.loss,
            "train_inductive: TrainOptions::loss is not supported (the loss is the batch's mean "
            "binary cross-entropy)");
  GAT_CHECK(options.checkpoints.path.empty() && options.checkpoints.resume.empty(),
            "train_inductive writes and resumes no run checkpoints");
  check_split("training", data.train, model.config());
  check_split("validation", data.val, model.config());
  check_split("test", data.test, model.config());
  const std::vector<DeviceBatch> val = device_batches(data.val, inductive.batch_size, device),
                                 test = device_batches(data.test, inductive.batch_size, device);
  EpochLoop loop(model, options);
  std::mt19937_64 shuffle(inductive.seed);
  std::vector<size_t> order(data.train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  double step_ms_total = 0;
  int64_t steps = 0;
  for (int64_t epoch = 1; epoch <= options.max_epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    std::shuffle(order.begin(), order.end(), shuffle);
    Totals totals;
    for (const auto& graphs : batches_of(data.train, order, inductive.batch_size)) {
      const DeviceBatch b = to_device(graphs, device);
      model.train();
      loop.optimizer->zero_grad();
      const Tensor logits = model.forward(b.x, b.looped);  // (N, C)
      const Tensor loss = ops::binary_cross_entropy_with_logits(logits, b.y);
      loss.backward();
      loop.optimizer->step();
      loop.optimizer->zero_grad();
      totals.add(logits.detach(), b.y, loss.item());
      ++steps;
    }
    EpochStats stats;
    stats.epoch = epoch;
    stats.step_ms = ms_since(start);
    step_ms_total += stats.step_ms;
    const SplitMetrics train = totals.metrics();
    stats.loss = train.loss;
    stats.train_acc = train.acc;
    const Evaluation eval{train, evaluate_batches(model, val), evaluate_batches(model, test)};
    const EarlyStopping::Decision decision = loop.judge(stats, eval);
    stats.ms = ms_since(start);
    if (on_epoch) on_epoch(stats);
    if (decision.stop) break;
  }
  loop.result.train_step_ms = step_ms_total / static_cast<double>(steps);
  restore_best(loop.result, data.train.front().x, options.lr, loop.params, loop.best_params);
  model.eval();
  return loop.result;
}

}  // namespace gat
