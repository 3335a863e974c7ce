// Optimisers: Adam, AdamW, SGD and RMSprop, each exactly as its torch.optim namesake
// (amsgrad/nesterov/maximize off, dampening 0).
//
//   AdamOptions options;
//   options.lr = 5e-3;
//   options.weight_decay = 5e-4;
//   Adam opt(model.parameters(), options);
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Parameter groups (torch's param_groups): each group may set its own learning rate and weight
// decay; what it leaves unset comes from the options. The rest of the options is shared.
//
//   Adam opt({{weights}, {biases_and_norms, std::nullopt, 0.0}}, options);  // no decay on group 1
//
// Parameters without a gradient are skipped (their state and step count stay as they are, as in
// PyTorch). State tensors (exp_avg, exp_avg_sq, momentum_buffer, square_avg, grad_avg) are
// created on a parameter's first update, on its device, and follow it when the parameter moves.
// CPU: OpenMP loops. CUDA: one fused kernel launch per group and step for up to kMaxSlots
// parameters of one dtype, the per-parameter pointers passed as kernel arguments (no copies, no
// host synchronisation). The step counts live on the host and, for CUDA parameters, also on the
// device, where the kernels advance them and derive Adam's bias corrections: a step recorded in
// a CUDA graph stays right at every replay (count_replayed_step keeps the host count in line).
// The learning rates are read and set with lr()/set_lr() (the schedulers below do that between
// steps); a step recorded in a CUDA graph keeps the rates it was recorded with.
//
// state_dict()/load_state_dict() give the optimiser's state (learning rates, step counts, state
// buffers) as named tensors; io::save(module, optimizer, path) writes them beside the parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/optim_update.h"
#include "gat/framework/tensor.h"

namespace gat {

// A group of parameters and the rates that differ from the optimiser's options.
struct ParamGroup {
  ParamGroup(std::vector<Tensor> params_, std::optional<double> lr_ = std::nullopt,
             std::optional<double> weight_decay_ = std::nullopt)
      : params(std::move(params_)), lr(lr_), weight_decay(weight_decay_) {}
  std::vector<Tensor> params;
  std::optional<double> lr;            // unset: the options' lr
  std::optional<double> weight_decay;  // unset: the options' weight_decay
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  void zero_grad();  // drops every parameter's gradient
  // Every group's parameters, group after group: the index i of step_count and state_dict.
  const std::vector<Tensor>& params() const { return params_; }
  // Updates applied to params()[i] so far.
  int64_t step_count(size_t i) const { return steps_.at(i); }
  // A CUDA graph that recorded step() was replayed: count it for the parameters it updated.
  void count_replayed_step();

  size_t num_groups() const { return groups_.size(); }
  // The parameters of `group`: params()[first, first + count).
  size_t group_first(size_t group) const { return groups_.at(group).first; }
  size_t group_size(size_t group) const { return groups_.at(group).count; }
  double lr(size_t group) const { return groups_.at(group).lr; }
  void set_lr(size_t group, double lr);  // lr >= 0 and finite; used from the next step() on
  double weight_decay(size_t group) const { return groups_.at(group).weight_decay; }
  // The same for an optimiser of one group (more groups: an error that says to name the group).
  double lr() const { return lr(single_group("lr")); }
  void set_lr(double lr) { set_lr(single_group("set_lr"), lr); }
  // Each group's rate when a scheduler first asked (torch's group["initial_lr"]): the schedulers'
  // base rates. Recorded by the first call.
  const std::vector<double>& initial_lrs();

  // The state as named tensors (host or device, as the parameters; copies, so a state kept in
  // memory does not change with later steps): "lr" f64, () for one group and (G,) for G groups;
  // "step" (P,) i32 (updates per parameter); and per parameter i that has state,
  // "<buffer>.<i>" (exp_avg and exp_avg_sq for Adam(W), momentum_buffer for SGD with momentum,
  // square_avg, momentum_buffer and grad_avg for RMSprop).
  std::map<std::string, Tensor> state_dict() const;
  // Restores a state_dict() of an optimiser of the same kind over groups and parameters of the
  // same shapes and dtypes (onto the parameters' devices), and of values it could have reached:
  // rates finite and >= 0, step counts >= 0, every buffer of a parameter present exactly when its
  // count is positive, and finite (the second buffer, Adam's exp_avg_sq or RMSprop's square_avg,
  // also >= 0). The first mismatch is reported and nothing changes.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // `name` names the optimiser in errors; lr and weight_decay are the options' (the groups'
  // defaults).
  Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay, const char* name);
  // One update of `rule` (its lr and weight_decay replaced by each group's) for every parameter
  // with a gradient, with the state buffers that buffer_names() names.
  void apply(optim::Rule rule);
  // The state buffers by their place in optim::update_element: {m, v, a}, "" for one not used.
  virtual std::vector<std::string> buffer_names() const = 0;

 private:
  struct Group {
    size_t first = 0, count = 0;
    double lr = 0, weight_decay = 0;
  };
  size_t single_group(const char* what) const;

  std::vector<Group> groups_;
  std::vector<double> initial_lrs_;  // empty until initial_lrs() is first called
  std::vector<Tensor> params_;
  std::vector<Tensor> buffers_[3];  // per buffer_names() place and parameter, lazily made
  std::vector<int64_t> steps_;
  std::vector<bool> recorded_updates_;  // the parameters the step recorded in a CUDA graph updates
  Tensor device_steps_;                 // (P,) i32 on the CUDA device: steps_ as the kernels see them
  bool device_steps_current_ = false;   // false after a CPU update or before the first CUDA one
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // Adam: L2, added to the gradient; AdamW: decoupled
};

// AdamW's defaults differ from Adam's only in the weight decay.
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};

// Adam and AdamW: the same hyper-parameters and state; `kind` says where the weight decay acts.
class AdamFamily : public Optimizer {
 public:
  void step() override;

 protected:
  AdamFamily(std::vector<ParamGroup> groups, const AdamOptions& options, optim::Kind kind);

 private:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq", ""}; }
  AdamOptions options_;  // options_.lr is the initial rate: lr() is the current one
  optim::Kind kind_;
};

// torch.optim.Adam:  g = grad + wd * p;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public AdamFamily {
 public:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = {})
      : AdamFamily(std::move(groups), options, optim::Kind::adam) {}
  Adam(std::vector<Tensor> params, const AdamOptions& options = {})
      : Adam(std::vector<ParamGroup>{{std::move(params)}}, options) {}
};

// torch.optim.AdamW: p *= 1 - lr * wd, then Adam's update with g = grad.
class AdamW : public AdamFamily {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = {})
      : AdamFamily(std::move(groups), options, optim::Kind::adamw) {}
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {})
      : AdamW(std::vector<ParamGroup>{{std::move(params)}}, options) {}
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

// torch.optim.SGD (dampening 0): g = grad + wd * p;  b = momentum * b + g (b = g at first);
//   p -= lr * (momentum ? b : g)
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options = {});
  SGD(std::vector<Tensor> params, const SGDOptions& options = {})
      : SGD(std::vector<ParamGroup>{{std::move(params)}}, options) {}
  void step() override;

 private:
  std::vector<std::string> buffer_names() const override;
  SGDOptions options_;  // options_.lr is the initial rate: lr() is the current one
};

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // the square average's smoothing constant, in [0, 1]
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2, added to the gradient
  double momentum = 0.0;
  bool centered = false;  // divide by the square average less the squared mean gradient
};

// torch.optim.RMSprop:  g = grad + wd * p;  v = alpha v + (1 - alpha) g^2;
//   centered: a = lerp(a, g, 1 - alpha), d = sqrt(v - a^2) + eps; else d = sqrt(v) + eps;
//   momentum > 0: b = momentum * b + g / d, p -= lr * b;  else p -= lr * g / d
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options = {});
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {})
      : RMSprop(std::vector<ParamGroup>{{std::move(params)}}, options) {}
  void step() override;

 private:
  std::vector<std::string> buffer_names() const override;
  RMSpropOptions options_;
};

// torch.nn.utils.clip_grad_norm_(params, max_norm): the 2-norm of all gradients together,
// total = sqrt(sum over parameters of sum(grad^2)); when total > max_norm every gradient is
// multiplied by max_norm / (total + 1e-6). Returns total (before clipping). Parameters without a
// gradient are skipped. f32/f64 on either device, through the deterministic reductions of
// ops::sum (same bits at every run); reads the total on the host, so it synchronises with the
// device and cannot be recorded in a CUDA graph.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// ---- learning-rate schedulers: torch.optim.lr_scheduler's, epoch-based, same values -----------
//
//   CosineAnnealingLR schedule(optimizer, epochs);
//   for (...) { train one epoch (optimizer.step() ...); schedule.step(); }
//
// A scheduler sets every group's rate from that group's base rate (Optimizer::initial_lrs).
// Constructing one sets the rates for epoch 0 (as torch's constructor does); step() moves to the
// next epoch and sets its rates. Each rate is derived from the current one with torch's own
// (chainable) formula, so the sequence matches torch's bit for bit in double.
class LRScheduler {
 public:
  // A schedule's two formulas for the rate at `epoch` (last_epoch()): from a group's current and
  // base rates (torch's get_lr), and from the base rate alone (torch's _get_closed_form_lr).
  struct Formulas {
    std::function<double(int64_t epoch, double current, double base)> next_lr;
    std::function<double(int64_t epoch, double base)> closed_form_lr;
  };

  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr(size_t group = 0) const { return base_lrs_.at(group); }
  Optimizer& optimizer() const { return optimizer_; }
  // Continues a schedule saved at `epoch` whose optimiser state (and so its current rate) has
  // been restored with load_state_dict: the next step() gives epoch + 1's rate.
  void resume_at(int64_t epoch);

 protected:
  // Sets the rates for epoch 0 (torch's initial step).
  LRScheduler(Optimizer& optimizer, Formulas formulas);

 private:
  friend class SequentialLR;
  // SequentialLR's hand-over: epoch 0 again, each group at closed_form_lr (torch's step(0)).
  void restart();

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  Formulas formulas_;
  int64_t last_epoch_ = -1;
};

// torch.optim.lr_scheduler.StepLR: lr = base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
};

// torch.optim.lr_scheduler.CosineAnnealingLR:
//   lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// (by torch's recursive form; past T_max the cosine continues, as in torch).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
};

// torch.optim.lr_scheduler.LinearLR, the linear warm-up: the factor on base_lr goes linearly
// from start_factor at epoch 0 to end_factor at epoch total_iters and stays there.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);
};

// torch.optim.lr_scheduler.SequentialLR: schedulers[0] until epoch milestones[0], then
// schedulers[1] from its epoch 0 (its closed form), and so on. Every scheduler must drive
// `optimizer`, and there is one milestone fewer than schedulers, ascending. As torch, it sets the
// rates back to the base rates and runs only the first scheduler's epoch 0.
//
//   auto warmup = std::make_shared<LinearLR>(opt, 0.1, 1.0, 5);
//   auto decay = std::make_shared<CosineAnnealingLR>(opt, 95);
//   SequentialLR schedule(opt, {warmup, decay}, {5});
class SequentialLR {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step();
  int64_t last_epoch() const { return last_epoch_; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
  int64_t last_epoch_ = 0;
};

struct ReduceLROnPlateauOptions {
  enum class Mode { min, max };  // whether a smaller or a larger metric is better
  enum class Threshold { rel, abs };
  Mode mode = Mode::min;
  double factor = 0.1;    // new rate = max(rate * factor, min_lr), factor in [0, 1)
  int64_t patience = 10;  // epochs without improvement tolerated; the next one reduces
  double threshold = 1e-4;
  // rel: better means below best * (1 - threshold) (min) or above best * (1 + threshold) (max);
  // abs: below best - threshold or above best + threshold.
  Threshold threshold_mode = Threshold::rel;
  int64_t cooldown = 0;  // epochs after a reduction that count as neither good nor bad
  double min_lr = 0.0;   // every group's floor
  double eps = 1e-8;     // a reduction smaller than this is not made
};

// torch.optim.lr_scheduler.ReduceLROnPlateau: step(metric) once an epoch. A metric that is not
// better than the best so far is a bad epoch; after more than `patience` bad epochs in a row
// every group's rate is reduced, the count starts again and `cooldown` epochs follow in which
// bad epochs are not counted. A NaN or infinite metric is an error.
class ReduceLROnPlateau {
 public:
  using Options = ReduceLROnPlateauOptions;
  explicit ReduceLROnPlateau(Optimizer& optimizer, const Options& options = {});
  void step(double metric);
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  int64_t last_epoch() const { return last_epoch_; }

 private:
  bool is_better(double metric) const;

  Optimizer& optimizer_;
  Options options_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace gat
