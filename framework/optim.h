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
#pragma once

#include <cstdint>
#include <vector>

#include "gat/framework/optim_update.h"
#include "gat/framework/tensor.h"

namespace gat {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
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

 protected:
  // One update of `rule` for every parameter with a gradient; `buffers` (0, 1 or 2) state
  // tensors per parameter: 1 = exp_avg or momentum_buffer, 2 = also exp_avg_sq.
  void apply(const optim::Rule& rule, int buffers);

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> buffer1_, buffer2_;  // per parameter, same shape/dtype/device, lazily made
  std::vector<int64_t> steps_;
  std::vector<bool> recorded_updates_;  // the parameters the step recorded in a CUDA graph updates
  Tensor device_steps_;        // (P,) i32 on the CUDA device: steps_ as the kernels see them
  bool device_steps_current_ = false;  // false after a CPU update or before the first CUDA one
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // L2: added to the gradient
};

// AdamW's defaults differ from Adam's only in the (decoupled) weight decay.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// torch.optim.Adam:  g = grad + wd * p;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2;
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  void step() override;

 private:
  AdamOptions options_;
};

// torch.optim.AdamW: p *= 1 - lr * wd, then Adam's update with g = grad.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  void step() override;

 private:
  AdamWOptions options_;
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
  SGDOptions options_;
};

}  // namespace gat
