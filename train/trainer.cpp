#include "train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <vector>

#include "datasets/planetoid.h"
#include "datasets/registry.h"
#include "framework/autograd.h"
#include "framework/cuda_runtime.h"
#include "framework/ops/accuracy.h"
#include "framework/ops/cross_entropy.h"
#include "framework/optim.h"

namespace gat {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Waits for queued device work so wall-clock times cover it.
void sync_if_cuda(const Dataset& data) {
  if (data.x.is_cuda()) cuda::synchronize();
}

SplitMetrics metrics(const Tensor& logits, const Dataset& data, const Tensor& index) {
  return {ops::masked_cross_entropy(logits, data.y, index).item(),
          ops::accuracy(logits, data.y, index)};
}

}  // namespace

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x) {
  autograd::NoGradGuard no_grad;
  model.eval();
  Generator no_dropout(0);  // eval mode draws no dropout stream from it
  const Tensor logits = forward(x, data.graph, no_dropout);  // (N, C)
  return {metrics(logits, data, data.train_index), metrics(logits, data, data.val_index),
          metrics(logits, data, data.test_index)};
}

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data) {
  return evaluate(model, forward, data, Features::choose(data.x));
}

TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  GAT_CHECK(options.max_epochs >= 1 && options.patience >= 1, "train: max_epochs ",
            options.max_epochs, " and patience ", options.patience, " must be at least 1");
  AdamOptions adam;
  adam.lr = options.lr;
  adam.weight_decay = options.weight_decay;
  Adam optimizer(model.parameters(), adam);
  const std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> best_params(params.size());

  TrainResult result;
  double best_acc = 0.0, best_loss = std::numeric_limits<double>::infinity();
  double step_ms_total = 0.0;
  int64_t wait = 0;
  const Features x = Features::choose(data.x, options.sparse_max_density);  // built once
  for (int64_t epoch = 1; epoch <= options.max_epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    model.train();
    optimizer.zero_grad();
    const Tensor logits = forward(x, data.graph, gen);  // (N, C)
    const Tensor loss = ops::masked_cross_entropy(logits, data.y, data.train_index);
    loss.backward();
    optimizer.step();
    sync_if_cuda(data);
    EpochStats stats;
    stats.epoch = epoch;
    stats.step_ms = ms_since(start);
    step_ms_total += stats.step_ms;
    stats.loss = loss.item();
    stats.train_acc = ops::accuracy(logits.detach(), data.y, data.train_index);

    const Evaluation eval = evaluate(model, forward, data, x);
    stats.val_loss = eval.val.loss;
    stats.val_acc = eval.val.acc;
    stats.test_acc = eval.test.acc;
    result.epochs = epoch;

    bool stop = false;
    if (stats.val_acc >= best_acc || stats.val_loss <= best_loss) {
      if (stats.val_acc >= best_acc && stats.val_loss <= best_loss) {
        result.test_acc = stats.test_acc;
        result.val_acc = stats.val_acc;
        result.val_loss = stats.val_loss;
        result.best_epoch = epoch;
        for (size_t i = 0; i < params.size(); ++i) best_params[i] = params[i].clone();
      }
      best_acc = std::max(best_acc, stats.val_acc);
      best_loss = std::min(best_loss, stats.val_loss);
      wait = 0;
    } else {
      stop = ++wait == options.patience;
    }
    stats.ms = ms_since(start);
    if (on_epoch) on_epoch(stats);
    if (stop) break;
  }
  result.train_step_ms = step_ms_total / static_cast<double>(result.epochs);
  GAT_CHECK(result.best_epoch > 0, "train: no epoch had a finite validation loss (last: ",
            best_loss, ")");
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    p.copy_(best_params[i]);
  }
  model.eval();
  return result;
}

Dataset load_training_dataset(const std::string& name, const std::string& data_dir) {
  Dataset data = load_dataset(name, data_dir);
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "cora" || lower == "citeseer" || lower == "pubmed") data.x = normalize_features(data.x);
  return data;
}

Dataset dataset_to(const Dataset& data, Device device) {
  Dataset out = data;
  out.x = data.x.to(device);
  out.y = data.y.to(device);
  out.train_index = data.train_index.to(device);
  out.val_index = data.val_index.to(device);
  out.test_index = data.test_index.to(device);
  out.graph = data.graph.to(device);
  return out;
}

}  // namespace gat
