#include "gat/train/trainer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gat/datasets/planetoid.h"
#include "gat/datasets/registry.h"
#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/detail/clock.h"
#include "gat/framework/ops/accuracy.h"
#include "gat/framework/ops/attention/self_loop_attr.h"
#include "gat/framework/ops/classification_metrics.h"
#include "gat/framework/ops/cross_entropy.h"
#include "gat/framework/optim.h"
#include "gat/framework/progress.h"
#include "gat/framework/side_work.h"
#include "gat/train/checkpoint.h"
#include "gat/train/early_stopping.h"

namespace gat {

namespace {

using detail::Clock;
using detail::ms_since;

// What an epoch reads back, written on the device by ops::classification_metrics and copied to
// the host in one read: row kStepRow the training step's training nodes (training mode, dropout
// on), rows kEvalRows.. the evaluation's train, validation and test nodes (eval mode).
constexpr int64_t kStepRow = 0, kEvalRows = 1, kMetricRows = 4;

// What the loss's gradient reads besides the logits, made by the first step and kept (a fill and
// the count's two launches fewer in every later one): d loss = 1 in the logits' dtype and device,
// and how often each row appears in the training index (ops::masked_row_counts).
struct LossGradientInputs {
  Tensor seed;          // ()
  Tensor train_counts;  // (N,) i32
};

// One training step, queued without waiting: forward in training mode, the gradient of `loss`
// or, without one, of the masked cross-entropy on the training nodes
// (ops::masked_cross_entropy_grad: the loss itself is not computed, as the logged loss comes
// from `metrics`), backward, optimiser step; the loss and
// correct counts of the training nodes go to `metrics` (1, 3). Gradients are dropped before and
// after, so a recorded step frees all the memory it makes.
void queue_step(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x,
                Optimizer& optimizer, Generator& gen, const TrainLoss& loss, LossGradientInputs& loss_grad,
                Tensor& metrics) {
  model.train();
  optimizer.zero_grad();
  const Tensor logits = forward(x, data.graph, gen);  // (N, C)
  SideWork side;                                      // the training nodes' metrics, beside the backward pass
  side.run({logits.detach(), data.y, data.train_index, metrics}, [](const std::vector<Tensor>& in) {
    Tensor out = in[3];
    ops::classification_metrics(in[0], in[1], {in[2]}, out);
    return std::vector<Tensor>{};
  });
  if (loss) {
    const Tensor value = loss(logits, data);
    GAT_CHECK(value.defined() && value.numel() == 1 && value.requires_grad(), "train: the loss gave ",
              value.describe(), ": it must be one value with autograd (computed from the logits)");
    value.backward();
  } else {
    if (!loss_grad.seed.defined() || loss_grad.seed.dtype() != logits.dtype() ||
        loss_grad.seed.device() != logits.device())
      loss_grad = {Tensor::full({}, 1.0, logits.dtype(), logits.device()),
                   ops::masked_row_counts(data.train_index, logits.size(0))};
    logits.backward(ops::masked_cross_entropy_grad(logits, data.y, data.train_index, loss_grad.train_counts,
                                                   loss_grad.seed));
  }
  optimizer.step();
  optimizer.zero_grad();
  side.join();
}

// The evaluation, queued without waiting: eval mode, no autograd, the losses and correct counts
// of the train, validation and test nodes to `metrics` (3, 3).
void queue_eval(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x,
                Tensor& metrics) {
  autograd::NoGradGuard no_grad;
  model.eval();
  Generator no_dropout(0);                                   // eval mode draws no dropout stream from it
  const Tensor logits = forward(x, data.graph, no_dropout);  // (N, C)
  ops::classification_metrics(logits, data.y, {data.train_index, data.val_index, data.test_index}, metrics);
}

// Row `row` of metrics read back (f64 (rows, 3) as classification_metrics), for the nodes of index.
SplitMetrics split_metrics(const std::vector<double>& metrics, int64_t row, const Tensor& index) {
  const size_t at = static_cast<size_t>(3 * row);
  return {metrics[at],
          ops::accuracy_from_counts(
              {static_cast<int32_t>(metrics[at + 1]), static_cast<int32_t>(metrics[at + 2])}, index)};
}

// The evaluation in rows first.. of metrics read back.
Evaluation read_eval(const std::vector<double>& metrics, int64_t first, const Dataset& data) {
  return {split_metrics(metrics, first, data.train_index), split_metrics(metrics, first + 1, data.val_index),
          split_metrics(metrics, first + 2, data.test_index)};
}

// An epoch's step time and its one read of the metrics. On CUDA two events around the step time
// it, so the host queues the evaluation behind the step without waiting for the step alone, and
// the metrics come back through page-locked memory. On the CPU every op has finished when it
// returns: the wall clock times the step and the metrics are read as they are.
class EpochReads {
 public:
  explicit EpochReads(const Tensor& metrics) : metrics_(metrics) {
    if (metrics.is_cuda()) cuda_ = std::make_unique<CudaSide>(metrics.nbytes());
  }
  void step_begins() {
    if (cuda_)
      cuda_->step_start.record();
    else
      step_start_ = Clock::now();
  }
  void step_ends() {
    if (cuda_)
      cuda_->step_end.record();
    else
      step_ms_ = ms_since(step_start_);
  }
  // Waits for the epoch's work and returns the metrics; step_ms() is the step's time from then.
  std::vector<double> read() {
    if (!cuda_) return metrics_.to_vector<double>();
    cuda_->host.copy_from_device(metrics_.raw_data(), metrics_.nbytes());
    cuda::synchronize();
    step_ms_ = cuda::Event::elapsed_ms(cuda_->step_start, cuda_->step_end);
    const double* numbers = static_cast<const double*>(cuda_->host.data());
    return {numbers, numbers + metrics_.numel()};
  }
  double step_ms() const { return step_ms_; }

 private:
  struct CudaSide {
    explicit CudaSide(size_t bytes) : host(bytes) {}
    cuda::Event step_start, step_end;
    cuda::HostBuffer host;
  };
  Tensor metrics_;  // f64 (kMetricRows, 3)
  std::unique_ptr<CudaSide> cuda_;
  Clock::time_point step_start_;
  double step_ms_ = 0.0;
};

// The step and the evaluation recorded once as CUDA graphs and replayed every epoch. The
// dropout streams come from a device counter that each replay advances, and the optimiser
// counts its steps on the device, so a replay does exactly what queue_step would. The graphs
// write their results into `step_metrics` and `eval_metrics`, made before the recording: a
// recorded graph keeps no memory of its own (cuda::capture).
class RecordedEpoch {
 public:
  RecordedEpoch(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x,
                Optimizer& optimizer, Generator& gen, const TrainLoss& loss,
                const LossGradientInputs& loss_grad, const Tensor& step_metrics, const Tensor& eval_metrics)
      : optimizer_(optimizer),
        gen_(gen),
        loss_grad_(loss_grad),
        step_metrics_(step_metrics),
        eval_metrics_(eval_metrics) {
    stream_base_.set(gen.next_stream());
    step_ = cuda::capture(
        [&] {
          gen.begin_device_streams(stream_base_.get());
          try {
            queue_step(model, forward, data, x, optimizer, gen, loss, loss_grad_, step_metrics_);
          } catch (...) {
            gen.end_device_streams();
            throw;
          }
          streams_per_step_ = gen.end_device_streams();
          stream_base_.advance(streams_per_step_);
        },
        &why_);
    if (step_.valid())
      eval_ = cuda::capture([&] { queue_eval(model, forward, data, x, eval_metrics_); }, &why_);
  }
  bool valid() const { return step_.valid() && eval_.valid(); }
  const std::string& why() const { return why_; }

  // Each false when the device has no memory left for the graph (nothing queued: the caller then
  // runs the same work eagerly).
  bool step() {
    if (!step_.replay()) return false;
    gen_.skip_streams(streams_per_step_);
    optimizer_.count_replayed_step();
    return true;
  }
  bool eval() { return eval_.replay(); }

 private:
  Optimizer& optimizer_;
  Generator& gen_;
  cuda::DeviceCounter stream_base_;
  uint64_t streams_per_step_ = 0;
  cuda::CapturedGraph step_, eval_;
  LossGradientInputs loss_grad_;        // made by the eager first epoch, the step graph reads it
  Tensor step_metrics_, eval_metrics_;  // (1, 3), (3, 3): the graphs write here
  std::string why_;
};

// What train_node_classifier carries from epoch to epoch besides the parameters and the
// optimiser: saved in run checkpoints (numbers in the metadata, exact to the bit: %.17g).
struct LoopState {
  explicit LoopState(int64_t patience) : stopping(patience) {}
  int64_t epoch = 0;  // the last epoch completed
  bool stopped = false;
  EarlyStopping stopping;
  double step_ms_total = 0.0;
  TrainResult result;
  std::vector<Tensor> best_params;
  // Set by a resume: the checkpoint's generator position, checked by the first resumed step.
  struct Resumed {
    std::string where;
    uint64_t start = 0;  // the resuming generator's stream before it skipped to `saved`
    uint64_t saved = 0;  // trainer.next_stream
    int64_t epoch = 0;   // trainer.epoch
  };
  std::optional<Resumed> resumed;
};

// A step draws the same number of dropout streams every epoch (the CUDA replay relies on it). So
// a run whose generator began at the resuming generator's stream is at start + epoch * per_step
// after `epoch` epochs, or further on if it began further on. Below that, the resumed epochs would
// draw earlier epochs' dropout masks again (a hand-edited trainer.next_stream of 0 replays epoch
// 1's). Checked once the first resumed step has drawn its streams, before it is logged or saved.
void check_resumed_stream(const LoopState::Resumed& r, uint64_t per_step) {
  const uint64_t least = r.start + static_cast<uint64_t>(r.epoch) * per_step;
  GAT_CHECK(r.saved >= least, r.where, ": metadata 'trainer.next_stream' = ", r.saved, " is before the ",
            least, " that epoch ", r.epoch, " (trainer.epoch) reaches from stream ", r.start, " at ",
            per_step,
            " dropout streams a step: the resumed run would draw earlier epochs' dropout masks again");
}

// A loss as metadata: a JSON number, or "inf" (early stopping's best before a finite epoch).
constexpr const char* kInfinity = "inf";
std::string loss_text(double loss) { return std::isinf(loss) ? kInfinity : io::metadata_number(loss); }

void save_run(const std::string& path, const Module& model, const Optimizer& optimizer, const Generator& gen,
              const LoopState& s, const io::Metadata& extra) {
  io::Metadata meta = extra;
  meta[kCheckpointEpochKey] = io::metadata_number(s.epoch);
  meta["trainer.stopped"] = s.stopped ? "1" : "0";
  meta["trainer.best_acc"] = io::metadata_number(s.stopping.best_acc());
  meta["trainer.best_loss"] = loss_text(s.stopping.best_loss());
  meta["trainer.wait"] = io::metadata_number(s.stopping.wait());
  meta["trainer.step_ms_total"] = io::metadata_number(s.step_ms_total);
  meta["trainer.test_acc"] = io::metadata_number(s.result.test_acc);
  meta["trainer.val_acc"] = io::metadata_number(s.result.val_acc);
  meta["trainer.val_loss"] = io::metadata_number(s.result.val_loss);
  meta["trainer.best_epoch"] = io::metadata_number(s.result.best_epoch);
  meta["trainer.seed"] = io::metadata_number(gen.seed());
  meta["trainer.next_stream"] = io::metadata_number(gen.next_stream());
  io::TensorMap best;
  for (size_t i = 0; i < s.best_params.size(); ++i)
    if (s.best_params[i].defined()) best.emplace("best." + std::to_string(i), s.best_params[i]);
  io::save(model, optimizer, path, meta, best);
}

// Reads a run checkpoint into the model, the optimiser, the generator and `s`, after checking
// every value against what a run with these options could have saved: nothing changes before
// all of it is checked, and the training starts only from a state it could have reached.
void resume_run(const std::string& path, const TrainOptions& options, Module& model, Optimizer& optimizer,
                Generator& gen, LoopState& s) {
  const std::string where = "resume: " + path;
  const io::Safetensors file = io::load_safetensors(path);
  const io::MetadataReader read(file.metadata, where);
  auto integer_in = [&](const char* key, int64_t lo, int64_t hi) {
    const int64_t v = read.integer(key);
    check_in_range(where + ": metadata " + key, v, Range<int64_t>{lo, hi});
    return v;
  };
  auto number_in = [&](const char* key, double lo, double hi) {
    const double v = read.number(key);
    check_in_range(where + ": metadata " + key, v, Range<double>{lo, hi});
    return v;
  };
  const double kNoBound = std::numeric_limits<double>::max();
  const uint64_t seed = read.unsigned_integer("trainer.seed");
  GAT_CHECK(seed == gen.seed(), where, ": the run used generator seed ", seed, ", this one has ", gen.seed());
  const uint64_t stream = read.unsigned_integer("trainer.next_stream");
  GAT_CHECK(stream >= gen.next_stream(), where, ": the generator is already past the saved stream");
  const int64_t epoch = integer_in(kCheckpointEpochKey, 1, TrainOptions::kEpochsRange.hi);
  GAT_CHECK(epoch <= options.max_epochs, where, ": the run is at epoch ", epoch, " (", kCheckpointEpochKey,
            "), past the ", options.max_epochs, " epochs asked for (max_epochs, --epochs): it cannot end at ",
            options.max_epochs, "; ask for ", epoch, " or more");
  const std::string& stopped = read.text("trainer.stopped");
  GAT_CHECK(stopped == "0" || stopped == "1", where, ": metadata 'trainer.stopped' = '", stopped,
            "' is not 0 or 1");
  const int64_t wait = integer_in("trainer.wait", 0, options.patience);
  const double best_acc = number_in("trainer.best_acc", 0.0, 1.0);
  const std::string& best_loss_text = read.text("trainer.best_loss");
  const double best_loss = best_loss_text == kInfinity ? std::numeric_limits<double>::infinity()
                                                       : number_in("trainer.best_loss", 0.0, kNoBound);
  const int64_t best_epoch = integer_in("trainer.best_epoch", 0, TrainOptions::kEpochsRange.hi);
  s.step_ms_total = number_in("trainer.step_ms_total", 0.0, kNoBound);
  s.result.test_acc = number_in("trainer.test_acc", 0.0, 1.0);
  s.result.val_acc = number_in("trainer.val_acc", 0.0, 1.0);
  s.result.val_loss = number_in("trainer.val_loss", 0.0, kNoBound);
  const auto steps = file.tensors.find(std::string(io::kOptimizerPrefix) + "step");
  check_run_progress(
      {epoch, steps == file.tensors.end() ? Tensor() : steps->second, best_epoch, wait, stopped == "1",
       best_acc, best_loss, s.result.val_acc, s.result.val_loss, s.result.test_acc},
      options.patience, where);
  // The remembered parameters: one per parameter once an epoch was remembered, none before.
  const std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> best(params.size());
  size_t run_tensors = 0;
  for (const auto& [name, t] : file.tensors) run_tensors += name.rfind(io::kRunStatePrefix, 0) == 0 ? 1 : 0;
  GAT_CHECK(run_tensors == (best_epoch > 0 ? params.size() : 0), where, ": holds ", run_tensors,
            " remembered parameters ('", io::kRunStatePrefix, "best.*'), the model has ", params.size(),
            " and the remembered epoch is ", best_epoch);
  for (size_t i = 0; best_epoch > 0 && i < params.size(); ++i) {
    const std::string name = std::string(io::kRunStatePrefix) + "best." + std::to_string(i);
    auto it = file.tensors.find(name);
    GAT_CHECK(it != file.tensors.end(), where, ": missing tensor '", name, "' (the remembered parameter ", i,
              ")");
    GAT_CHECK(it->second.shape() == params[i].shape() && it->second.dtype() == params[i].dtype(), where,
              ": tensor '", name, "' is ", it->second.describe(), ", the parameter ", params[i].describe());
    const int64_t bad = first_non_finite(it->second);
    GAT_CHECK(bad < 0, where, ": tensor '", name, "' holds a NaN or infinity (at flat index ", bad, ")");
    best[i] = it->second.to(params[i].device());
  }
  io::load_into(model, optimizer, file, path);  // each checked before either changes
  s.resumed = LoopState::Resumed{where, gen.next_stream(), stream, epoch};
  gen.skip_streams(stream - gen.next_stream());
  s.epoch = epoch;
  s.stopped = stopped == "1";
  s.stopping.restore(best_acc, best_loss, wait);
  s.result.best_epoch = best_epoch;
  s.result.epochs = epoch;
  s.best_params = best;
}

// The largest |value| of a float tensor (0 when empty), for messages.
double largest_magnitude(const Tensor& t) {
  double largest = 0;
  for (double v : t.to(Device::cpu).to(DType::f64).to_vector<double>())
    largest = std::max(largest, std::fabs(v));
  return largest;
}

}  // namespace

void TrainOptions::validate() const {
  check_in_range("train: lr", lr, kLrRange);
  check_in_range("train: weight_decay", weight_decay, kWeightDecayRange);
  check_in_range("train: max_epochs", max_epochs, kEpochsRange);
  check_in_range("train: patience", patience, kEpochsRange);
}

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data, const Features& x) {
  Tensor metrics = Tensor::empty({kMetricRows - kEvalRows, 3}, DType::f64, data.x.device(), "evaluation");
  queue_eval(model, forward, data, x, metrics);
  return read_eval(metrics.to_vector<double>(), 0, data);
}

void check_finite_evaluation(const Evaluation& e, const std::string& where) {
  for (const auto& [split, metrics] : {std::pair{"train", e.train}, {"val", e.val}, {"test", e.test}})
    GAT_CHECK(std::isfinite(metrics.loss), where, ": the model's ", split, " loss is ", metrics.loss,
              ": its outputs are not finite numbers");
}

Evaluation evaluate(Module& model, const ForwardFn& forward, const Dataset& data) {
  return evaluate(model, forward, data, Features::choose(data.x));
}

TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  return train_node_classifier(model, forward, data, Features::choose(data.x, options.sparse_max_density),
                               options, gen, on_epoch);
}

TrainResult train_node_classifier(Module& model, const ForwardFn& forward, const Dataset& data,
                                  const Features& x, const TrainOptions& options, Generator& gen,
                                  const std::function<void(const EpochStats&)>& on_epoch) {
  options.validate();
  GAT_CHECK(x.rows() == data.x.size(0) && x.cols() == data.x.size(1) && x.device() == data.x.device(),
            "train: the features ", x.describe(), " are not data.x's shape and device (", data.x.describe(),
            ")");
  const std::unique_ptr<Optimizer> made = make_run_optimizer(model, options);
  Optimizer& optimizer = *made;
  const std::vector<Tensor> params = model.parameters();
  const TrainCheckpoints& checkpoints = options.checkpoints;
  GAT_CHECK(checkpoints.every >= 1, "train: checkpoints.every ", checkpoints.every, " must be at least 1");
  LoopState state(options.patience);
  state.best_params.resize(params.size());
  if (!checkpoints.resume.empty()) {
    resume_run(checkpoints.resume, options, model, optimizer, gen, state);
    // A fresh run starts from finite outputs; a resumed one must too (as --load's model must).
    check_finite_evaluation(evaluate(model, forward, data, x), "resume: " + checkpoints.resume);
  }
  TrainResult& result = state.result;
  std::vector<Tensor>& best_params = state.best_params;
  EarlyStopping& stopping = state.stopping;
  double& step_ms_total = state.step_ms_total;
  const int64_t first_epoch = state.epoch + 1;
  Tensor metrics = Tensor::empty({kMetricRows, 3}, DType::f64, data.x.device(), "epoch metrics");
  Tensor step_metrics = metrics.rows(kStepRow, kStepRow + 1),
         eval_metrics = metrics.rows(kEvalRows, kMetricRows);
  LossGradientInputs loss_grad;  // made by the first step (queue_step)
  EpochReads reads(metrics);
  // Recorded after the first (eager) epoch has made the optimiser state and every cache.
  std::unique_ptr<RecordedEpoch> recorded;
  bool record = options.cuda_graphs && data.x.is_cuda();
  result.cuda_graphs_note = record ? "not recorded: training ended after its first epoch" : "off";
  for (int64_t epoch = first_epoch; epoch <= options.max_epochs && !state.stopped; ++epoch) {
    const Clock::time_point start = Clock::now();  // the second epoch's times include the recording
    reads.step_begins();
    if (record && epoch == first_epoch + 1) {
      record = false;
      recorded = std::make_unique<RecordedEpoch>(model, forward, data, x, optimizer, gen, options.loss,
                                                 loss_grad, step_metrics, eval_metrics);
      if (!recorded->valid()) {  // fall back to eager steps
        result.cuda_graphs_note = "not recorded: " + recorded->why();
        recorded.reset();
      } else {
        // The graphs allocate from a pool of their own: what the eager epoch left cached in the
        // stream-ordered pool goes back to the device (at a billion edges both do not fit).
        cuda::release_cached_memory();
      }
    }
    // A replay the device has no memory for drops the recording: eager steps from then on.
    auto drop_recording = [&](const char* what) {
      result.cuda_graphs_note = "dropped at epoch " + std::to_string(epoch) +
                                ": out of device memory replaying the recorded " + what;
      recorded.reset();
      cuda::release_cached_memory();
    };
    if (recorded && !recorded->step()) drop_recording("step");
    const uint64_t stream_before_step = gen.next_stream();
    if (!recorded) queue_step(model, forward, data, x, optimizer, gen, options.loss, loss_grad, step_metrics);
    if (state.resumed && epoch == first_epoch)  // always an eager step: recording begins an epoch later
      check_resumed_stream(*state.resumed, gen.next_stream() - stream_before_step);
    reads.step_ends();
    if (recorded && !recorded->eval()) drop_recording("evaluation");
    if (!recorded) queue_eval(model, forward, data, x, eval_metrics);
    const std::vector<double> numbers = reads.read();  // the epoch's one wait and read
    EpochStats stats;
    stats.epoch = epoch;
    stats.step_ms = reads.step_ms();
    step_ms_total += stats.step_ms;
    const SplitMetrics trained = split_metrics(numbers, kStepRow, data.train_index);
    stats.loss = trained.loss;
    stats.train_acc = trained.acc;
    const EarlyStopping::Decision decision =
        judge_epoch(stats, read_eval(numbers, kEvalRows, data), stopping, result, params, best_params);
    stats.ms = ms_since(start);
    state.epoch = epoch;
    state.stopped = decision.stop;
    if (on_epoch) on_epoch(stats);  // (first: a log line is never missing for a saved epoch)
    if (!checkpoints.path.empty() &&
        (epoch % checkpoints.every == 0 || decision.stop || epoch == options.max_epochs))
      save_run(checkpoints.path, model, optimizer, gen, state, checkpoints.metadata);
  }
  if (recorded) result.cuda_graphs_note = "recorded";
  recorded.reset();
  result.train_step_ms = result.epochs > 0 ? step_ms_total / static_cast<double>(result.epochs) : 0.0;
  restore_best(result, data.x, options.lr, params, best_params);
  model.eval();
  return result;
}

std::unique_ptr<Optimizer> make_run_optimizer(Module& model, const TrainOptions& options) {
  if (options.make_optimizer) {
    std::unique_ptr<Optimizer> made = options.make_optimizer(model);
    GAT_CHECK(made != nullptr, "train: make_optimizer gave no optimiser");
    return made;
  }
  AdamOptions adam;
  adam.lr = options.lr;
  adam.weight_decay = options.weight_decay;
  return std::make_unique<Adam>(model.parameters(), adam);
}

EarlyStopping::Decision judge_epoch(EpochStats& stats, const Evaluation& eval, EarlyStopping& stopping,
                                    TrainResult& result, const std::vector<Tensor>& params,
                                    std::vector<Tensor>& best) {
  stats.val_loss = eval.val.loss;
  stats.val_acc = eval.val.acc;
  stats.test_acc = eval.test.acc;
  result.epochs = stats.epoch;
  const EarlyStopping::Decision decision = stopping.update(stats.val_acc, stats.val_loss);
  if (!decision.remember) return decision;
  result.test_acc = stats.test_acc;
  result.val_acc = stats.val_acc;
  result.val_loss = stats.val_loss;
  result.best_epoch = stats.epoch;
  for (size_t i = 0; i < params.size(); ++i) {  // copied into the kept tensors, not allocated again
    if (best[i].defined())
      best[i].copy_(params[i]);
    else
      best[i] = params[i].clone();
  }
  return decision;
}

EpochLoop::EpochLoop(Module& model, const TrainOptions& options)
    : optimizer(make_run_optimizer(model, options)),
      params(model.parameters()),
      best_params(params.size()),
      stopping(options.patience) {
  result.cuda_graphs_note = "off";
}

EarlyStopping::Decision EpochLoop::judge(EpochStats& stats, const Evaluation& eval) {
  return judge_epoch(stats, eval, stopping, result, params, best_params);
}

void restore_best(const TrainResult& result, const Tensor& x, double lr, const std::vector<Tensor>& params,
                  const std::vector<Tensor>& best) {
  GAT_CHECK(result.best_epoch > 0, "train: no epoch had a finite validation loss: the outputs overflowed or ",
            "turned NaN. The likely inputs: features of huge magnitude (the largest in data.x is ",
            largest_magnitude(x), ") or too high a rate (lr ", lr, ")");
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    p.copy_(best[i]);
  }
}

Evaluation evaluate_logits(const Tensor& logits, const Dataset& data) {
  return read_eval(
      ops::classification_metrics(logits, data.y, {data.train_index, data.val_index, data.test_index})
          .to_vector<double>(),
      0, data);
}

Recipe recipe_for(const std::string& dataset) {
  std::string key = dataset;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  Recipe recipe;
  if (key == "pubmed") {
    recipe.output_heads = 8;
    recipe.lr = 0.01;
    recipe.weight_decay = 0.001;
  }
  return recipe;
}

Dataset load_training_dataset(const std::string& name, const std::string& data_dir) {
  Dataset data = load_dataset(name, data_dir);
  if (data.preprocessing == Dataset::Preprocessing::row_normalize) data.x = normalize_features(data.x);
  return data;
}

std::pair<Graph, Tensor> with_self_loops(const Graph& graph, const Tensor& edge_attr) {
  Graph looped = graph.with_self_loops();
  // The loops' rows are placeholders (0): GATConv replaces them by its fill_value.
  Tensor attr = edge_attr.defined()
                    ? ops::self_loop_attr(graph, looped, edge_attr, ops::SelfLoopFill::constant_value(0.0))
                    : Tensor();
  return {std::move(looped), std::move(attr)};
}

Dataset with_self_loops(Dataset data) {
  std::tie(data.graph, data.edge_attr) = with_self_loops(data.graph, data.edge_attr);
  return data;
}

Dataset dataset_to(const Dataset& data, Device device) {
  progress::Stage stage(detail::concat("dataset: copied to ", device_name(device)),
                        data.x.device() == device ? 0 : data.x.numel() + data.graph.num_edges());
  Dataset out = data;
  out.x = data.x.to(device);
  out.y = data.y.to(device);
  out.train_index = data.train_index.to(device);
  out.val_index = data.val_index.to(device);
  out.test_index = data.test_index.to(device);
  out.graph = data.graph.to(device);
  if (data.edge_attr.defined()) out.edge_attr = data.edge_attr.to(device);
  if (device == Device::cuda) cuda::synchronize();  // the copies' time, not the next stage's
  stage.done();
  return out;
}

}  // namespace gat
