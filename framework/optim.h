// Optimisers: Adam, AdamW and SGD, each exactly as its torch.optim namesake (single parameter
// group, amsgrad/nesterov/maximize off, dampening 0).
//
//   AdamOptions options;
//   options.lr = 5e-3;
//   options.weight_decay = 5e-4;
//   Adam opt(model.parameters(), options);
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Parameters without a gradient are skipped (their state and step count stay as they are, as in
// PyTorch). State tensors (exp_avg, exp_avg_sq, momentum_buffer) are created on a parameter's
// first update, on its device, and follow it when the parameter moves.
// CPU: OpenMP loops. CUDA: one fused kernel launch per step for up to kMaxSlots parameters of one
// dtype, the per-parameter pointers passed as kernel arguments (no copies, no host
// synchronisation). The step counts live on the host and, for CUDA parameters, also on the
// device, where the kernels advance them and derive Adam's bias corrections: a step recorded in
// a CUDA graph stays right at every replay (count_replayed_step keeps the host count in line).
// The learning rate is read and set with lr()/set_lr() (the schedulers below do that between
// steps); a step recorded in a CUDA graph keeps the rate it was recorded with.
//
// state_dict()/load_state_dict() give the optimiser's state (learning rate, step counts, moment
// buffers) as named tensors; io::save(module, optimizer, path) writes them beside the parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gat/framework/optim_update.h"
#include "gat/framework/tensor.h"

namespace gat {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  void zero_grad();  // drops every parameter's gradient
  const std::vector<Tensor>& params() const { return params_; }
  // Updates applied to params()[i] so far.
  int64_t step_count(size_t i) const { return steps_.at(i); }
  // A CUDA graph that recorded step() was replayed: count it for the parameters it updated.
  void count_replayed_step();

  double lr() const { return lr_; }
  void set_lr(double lr);  // lr >= 0; used from the next step() on

  // The state as named tensors (host or device, as the parameters): "lr" () f64, "step" (P,) i32
  // (updates per parameter), and per parameter i that has state, "<buffer>.<i>" (exp_avg and
  // exp_avg_sq for Adam(W), momentum_buffer for SGD with momentum).
  std::map<std::string, Tensor> state_dict() const;
  // Restores a state_dict() of an optimiser of the same kind over parameters of the same shapes
  // and dtypes (onto the parameters' devices), and of values it could have reached: lr finite and
  // >= 0, step counts >= 0, every buffer of a parameter present exactly when its count is
  // positive, and finite (the second buffer, exp_avg_sq, also >= 0). The first mismatch is reported
  // and nothing changes.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // One update of `rule` for every parameter with a gradient; `buffers` (0, 1 or 2) state
  // tensors per parameter: 1 = exp_avg or momentum_buffer, 2 = also exp_avg_sq.
  void apply(const optim::Rule& rule, int buffers);
  // The names of the state buffers this optimiser uses (0, 1 or 2 of them).
  virtual std::vector<std::string> buffer_names() const = 0;

 private:
  double lr_;
  std::vector<Tensor> params_;
  std::vector<Tensor> buffer1_, buffer2_;  // per parameter, same shape/dtype/device, lazily made
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
  AdamFamily(std::vector<Tensor> params, const AdamOptions& options, optim::Kind kind);

 private:
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  AdamOptions options_;  // options_.lr is the initial rate: lr() is the current one
  optim::Kind kind_;
};

// torch.optim.Adam:  g = grad + wd * p;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public AdamFamily {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {})
      : AdamFamily(std::move(params), options, optim::Kind::adam) {}
};

// torch.optim.AdamW: p *= 1 - lr * wd, then Adam's update with g = grad.
class AdamW : public AdamFamily {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {})
      : AdamFamily(std::move(params), options, optim::Kind::adamw) {}
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
  SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  void step() override;

 private:
  std::vector<std::string> buffer_names() const override;
  SGDOptions options_;  // options_.lr is the initial rate: lr() is the current one
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
// Constructing a scheduler sets the optimiser's rate for epoch 0 (as torch's constructor does);
// step() moves to the next epoch and sets its rate. Each rate is derived from the current one
// with torch's own (chainable) formula, so the sequence matches torch's bit for bit in double.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }
  // Continues a schedule saved at `epoch` whose optimiser state (and so its current rate) has
  // been restored with load_state_dict: the next step() gives epoch + 1's rate.
  void resume_at(int64_t epoch);

 protected:
  // Called by the derived constructor once its fields are set: torch's initial step (epoch 0).
  void start();
  // The rate for last_epoch() given the current one (torch's get_lr).
  virtual double next_lr(double current) const = 0;

 private:
  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = -1;
};

// torch.optim.lr_scheduler.StepLR: lr = base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double next_lr(double current) const override;
  int64_t step_size_;
  double gamma_;
};

// torch.optim.lr_scheduler.CosineAnnealingLR:
//   lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// (by torch's recursive form; past T_max the cosine continues, as in torch).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 private:
  double next_lr(double current) const override;
  int64_t T_max_;
  double eta_min_;
};

// torch.optim.lr_scheduler.LinearLR, the linear warm-up: the factor on base_lr goes linearly
// from start_factor at epoch 0 to end_factor at epoch total_iters and stays there.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);

 private:
  double next_lr(double current) const override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace gat
