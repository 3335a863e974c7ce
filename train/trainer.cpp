#include "gat/train/trainer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gat/datasets/planetoid.h"
#include "gat/datasets/registry.h"
#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/concat.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/ops/reshape.h"
#include "gat/framework/optim.h"
#include "gat/train/early_stopping.h"

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

// One training step, queued without waiting: forward in training mode, masked cross-entropy on
// the training nodes, backward, optimiser step. Gradients are dropped before and after, so a
// recorded step frees all the memory it makes but its outputs (RecordedEpoch copies those).
struct StepOutputs {
  Tensor loss;            // () training loss
  Tensor train_counts;    // (2,) i32 correct_counts of the training nodes
};
StepOutputs queue_step(Module& model, const ForwardFn& forward, const Dataset& data,
                       const Features& x, Optimizer& optimizer, Generator& gen) {
  model.train();
  optimizer.zero_grad();
  const Tensor logits = forward(x, data.graph, gen);  // (N, C)
  const Tensor loss = ops::masked_cross_entropy(logits, data.y, data.train_index);
  loss.backward();
  optimizer.step();
  optimizer.zero_grad();
  return {loss.detach(), ops::correct_counts(logits.detach(), data.y, data.train_index)};
}

// The index tensors of the train, validation and test nodes, in that order.
std::array<const Tensor*, 3> split_indices(const Dataset& data) {
  return {&data.train_index, &data.val_index, &data.test_index};
}

// The evaluation, queued without waiting: eval mode, no autograd, the losses (3,) and
// correct_counts (6,) of the train, validation and test nodes.
struct EvalOutputs {
  Tensor losses;  // (3,)
  Tensor counts;  // (6,) i32
};
EvalOutputs queue_eval(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x) {
  autograd::NoGradGuard no_grad;
  model.eval();
  Generator no_dropout(0);  // eval mode draws no dropout stream from it
  const Tensor logits = forward(x, data.graph, no_dropout);  // (N, C)
  std::vector<Tensor> losses, counts;
  for (const Tensor* index : split_indices(data)) {
    losses.push_back(ops::reshape(ops::masked_cross_entropy(logits, data.y, *index), {1}));
    counts.push_back(ops::correct_counts(logits, data.y, *index));
  }
  return {ops::concat(losses, 0), ops::concat(counts, 0)};
}

// The values of a small f32|f64 tensor on the host (one copy, no conversion on the device).
std::vector<double> host_doubles(const Tensor& t) {
  if (t.dtype() == DType::f64) return t.to_vector<double>();
  const std::vector<float> v = t.to_vector<float>();
  return {v.begin(), v.end()};
}

Evaluation read_eval(const EvalOutputs& out, const Dataset& data) {
  const std::vector<double> losses = host_doubles(out.losses);
  const std::vector<int32_t> counts = out.counts.to_vector<int32_t>();
  const std::array<const Tensor*, 3> index = split_indices(data);
  SplitMetrics m[3];
  for (int k = 0; k < 3; ++k)
    m[k] = {losses[k], ops::accuracy_from_counts({counts[2 * k], counts[2 * k + 1]}, *index[k])};
  return {m[0], m[1], m[2]};
}

// The step and the evaluation recorded once as CUDA graphs and replayed every epoch. The
// dropout streams come from a device counter that each replay advances, and the optimiser
// counts its steps on the device, so a replay does exactly what queue_step would. The graphs
// copy their results into the outputs of an eager epoch (`step_into`, `eval_into`): a recorded
// graph keeps no memory of its own (cuda::capture).
class RecordedEpoch {
 public:
  RecordedEpoch(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x,
                Optimizer& optimizer, Generator& gen, const StepOutputs& step_into,
                const EvalOutputs& eval_into)
      : optimizer_(optimizer), gen_(gen), step_out_(step_into), eval_out_(eval_into) {
    stream_base_.set(gen.next_stream());
    step_ = cuda::capture([&] {
      gen.begin_device_streams(stream_base_.get());
      try {
        const StepOutputs out = queue_step(model, forward, data, x, optimizer, gen);
        step_out_.loss.copy_(out.loss);
        step_out_.train_counts.copy_(out.train_counts);
      } catch (...) {
        gen.end_device_streams();
        throw;
      }
      streams_per_step_ = gen.end_device_streams();
      stream_base_.advance(streams_per_step_);
    }, &why_);
    if (step_.valid())
      eval_ = cuda::capture([&] {
        const EvalOutputs out = queue_eval(model, forward, data, x);
        eval_out_.losses.copy_(out.losses);
        eval_out_.counts.copy_(out.counts);
      }, &why_);
  }
  bool valid() const { return step_.valid() && eval_.valid(); }
  const std::string& why() const { return why_; }

  const StepOutputs& step() {
    step_.replay();
    gen_.skip_streams(streams_per_step_);
    optimizer_.count_replayed_step();
    return step_out_;
  }
  const EvalOutputs& eval() {
    eval_.replay();
    return eval_out_;
  }

 private:
  Optimizer& optimizer_;
  Generator& gen_;
  cuda::DeviceCounter stream_base_;
  uint64_t streams_per_step_ = 0;
  cuda::CapturedGraph step_, eval_;
  StepOutputs step_out_;
  EvalOutputs eval_out_;
  std::string why_;
};

}  // namespace

bool cuda_graphs_by_default() {
  const char* env = std::getenv("GAT_CUDA_GRAPHS");
  if (!env) return true;
  const std::string v = env;
  return !(v == "0" || v == "off" || v == "false");
}

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x) {
  return read_eval(queue_eval(model, forward, data, x), data);
}

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data) {
  return evaluate(model, forward, data, Features::choose(data.x));
}

TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  return train_node_classifier(model, forward, data,
                               Features::choose(data.x, options.sparse_max_density), options, gen,
                               on_epoch);
}

TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const Features& x, const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  GAT_CHECK(options.max_epochs >= 1 && options.patience >= 1, "train: max_epochs ",
            options.max_epochs, " and patience ", options.patience, " must be at least 1");
  GAT_CHECK(x.rows() == data.x.size(0) && x.cols() == data.x.size(1) && x.device() == data.x.device(),
            "train: the features ", x.describe(), " are not data.x's shape and device (",
            data.x.describe(), ")");
  AdamOptions adam;
  adam.lr = options.lr;
  adam.weight_decay = options.weight_decay;
  Adam optimizer(model.parameters(), adam);
  const std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> best_params(params.size());
  TrainResult result;
  EarlyStopping stopping(options.patience);
  double step_ms_total = 0.0;
  // Recorded after the first (eager) epoch has made the optimiser state and every cache.
  std::unique_ptr<RecordedEpoch> recorded;
  StepOutputs step;      // the last epoch's outputs (a recorded epoch writes into them)
  EvalOutputs eval_out;
  bool record = options.cuda_graphs && data.x.is_cuda();
  result.cuda_graphs_note = record ? "not recorded: training ended before epoch 2" : "off";
  for (int64_t epoch = 1; epoch <= options.max_epochs; ++epoch) {
    const Clock::time_point start = Clock::now();  // epoch 2's times include the recording
    if (record && epoch == 2) {
      record = false;
      recorded = std::make_unique<RecordedEpoch>(model, forward, data, x, optimizer, gen, step,
                                                 eval_out);
      if (!recorded->valid()) {  // fall back to eager steps
        result.cuda_graphs_note = "not recorded: " + recorded->why();
        recorded.reset();
      }
    }
    step = recorded ? recorded->step() : queue_step(model, forward, data, x, optimizer, gen);
    sync_if_cuda(data);
    EpochStats stats;
    stats.epoch = epoch;
    stats.step_ms = ms_since(start);
    step_ms_total += stats.step_ms;
    stats.loss = step.loss.item();
    stats.train_acc = ops::accuracy_from_counts(step.train_counts.to_vector<int32_t>(), data.train_index);
    eval_out = recorded ? recorded->eval() : queue_eval(model, forward, data, x);
    const Evaluation eval = read_eval(eval_out, data);
    stats.val_loss = eval.val.loss;
    stats.val_acc = eval.val.acc;
    stats.test_acc = eval.test.acc;
    result.epochs = epoch;
    const EarlyStopping::Decision decision = stopping.update(stats.val_acc, stats.val_loss);
    if (decision.remember) {
      result.test_acc = stats.test_acc;
      result.val_acc = stats.val_acc;
      result.val_loss = stats.val_loss;
      result.best_epoch = epoch;
      for (size_t i = 0; i < params.size(); ++i) best_params[i] = params[i].clone();
    }
    stats.ms = ms_since(start);
    if (on_epoch) on_epoch(stats);
    if (decision.stop) break;
  }
  if (recorded) result.cuda_graphs_note = "recorded";
  recorded.reset();
  result.train_step_ms = step_ms_total / static_cast<double>(result.epochs);
  GAT_CHECK(result.best_epoch > 0, "train: no epoch had a finite validation loss (last: ",
            stopping.best_loss(), ")");
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
