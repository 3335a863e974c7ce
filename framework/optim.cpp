#include "gat/framework/optim.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat {

namespace {

void check_adam(const char* name, double lr, double beta1, double beta2, double eps, double wd) {
  GAT_CHECK(lr >= 0, name, ": invalid learning rate ", lr);
  GAT_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, name, ": invalid betas (", beta1, ", ", beta2,
            "), each must be in [0, 1)");
  GAT_CHECK(eps >= 0, name, ": invalid eps ", eps);
  GAT_CHECK(wd >= 0, name, ": invalid weight_decay ", wd);
}

// A state buffer for `param`: zeros on the parameter's device, created on first use and moved
// along when the parameter has moved.
void ensure_buffer(Tensor& buffer, const Tensor& param) {
  if (!buffer.defined())
    buffer = Tensor::zeros(param.shape(), param.dtype(), param.device());
  else
    buffer.move_to_(param.device());
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <class T>
void cpu_step(const optim::Slot<T>& slot) {
  const long long n = slot.n;
#pragma omp parallel for if (n > ops::detail::kParallelThreshold)
  for (long long i = 0; i < n; ++i) {
    T m = slot.buffer1 ? slot.buffer1[i] : T(0), v = slot.buffer2 ? slot.buffer2[i] : T(0);
    optim::update_element(slot.scalars, slot.param[i], slot.grad[i], m, v);
    if (slot.buffer1) slot.buffer1[i] = m;
    if (slot.buffer2) slot.buffer2[i] = v;
  }
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : lr_(lr),
      params_(std::move(params)),
      buffer1_(params_.size()),
      buffer2_(params_.size()),
      steps_(params_.size(), 0) {
  for (size_t i = 0; i < params_.size(); ++i) {
    check_float("Optimizer", "parameter", params_[i]);
    GAT_CHECK(params_[i].requires_grad() && !params_[i].impl().grad_fn, "Optimizer: parameter ", i, " ",
              params_[i].describe(), " is not a leaf that requires grad");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

void Optimizer::count_replayed_step() {
  GAT_CHECK(recorded_updates_.size() == params_.size(),
            "Optimizer::count_replayed_step: no step was recorded in a CUDA graph");
  for (size_t i = 0; i < params_.size(); ++i) steps_[i] += recorded_updates_[i] ? 1 : 0;
}

void Optimizer::set_lr(double lr) {
  GAT_CHECK(lr >= 0, "Optimizer::set_lr: invalid learning rate ", lr);
  lr_ = lr;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> state;
  state.emplace("lr", Tensor::scalar(lr_, DType::f64));
  std::vector<int32_t> steps(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    GAT_CHECK(steps_[i] <= INT32_MAX, "Optimizer::state_dict: step count ", steps_[i], " of parameter ", i,
              " does not fit the checkpoint's i32");
    steps[i] = static_cast<int32_t>(steps_[i]);
  }
  state.emplace("step", Tensor::from_vector(steps, {static_cast<int64_t>(steps.size())}));
  const std::vector<std::string> names = buffer_names();
  const std::vector<Tensor>* buffers[] = {&buffer1_, &buffer2_};
  for (size_t b = 0; b < names.size(); ++b)
    for (size_t i = 0; i < params_.size(); ++i)
      if ((*buffers[b])[i].defined()) state.emplace(names[b] + "." + std::to_string(i), (*buffers[b])[i]);
  return state;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto lookup = [&](const std::string& name) -> const Tensor& {
    auto it = state.find(name);
    GAT_CHECK(it != state.end(), "Optimizer::load_state_dict: missing '", name, "'");
    return it->second;
  };
  const Tensor& lr = lookup("lr");
  check_shape("Optimizer::load_state_dict", "lr", lr, {});
  check_dtype("Optimizer::load_state_dict", "lr", lr, DType::f64);
  const Tensor& step = lookup("step");
  check_shape("Optimizer::load_state_dict", "step", step, {static_cast<int64_t>(params_.size())});
  check_dtype("Optimizer::load_state_dict", "step", step, DType::i32);
  const std::vector<std::string> names = buffer_names();
  size_t expected = 2;  // lr and step, then every buffer, each checked against its parameter
  for (const std::string& name : names)
    for (size_t i = 0; i < params_.size(); ++i) {
      auto it = state.find(name + "." + std::to_string(i));
      if (it == state.end()) continue;
      ++expected;
      GAT_CHECK(it->second.shape() == params_[i].shape() && it->second.dtype() == params_[i].dtype(),
                "Optimizer::load_state_dict: '", it->first, "' is ", it->second.describe(), " but parameter ",
                i, " is ", params_[i].describe());
    }
  GAT_CHECK(expected == state.size(), "Optimizer::load_state_dict: ", state.size() - expected,
            " entries are not state of this optimiser (", names.empty() ? "no buffers" : names[0] + "...",
            " over ", params_.size(), " parameters)");
  // The values too: a state this optimiser could have reached. A parameter has its buffers from
  // its first update on, so it holds all of them exactly when its step count is positive.
  const double rate = lr.item();
  GAT_CHECK(std::isfinite(rate) && rate >= 0.0, "Optimizer::load_state_dict: lr ", rate,
            " is not a finite number >= 0");
  const std::vector<int32_t> steps = step.to(Device::cpu).to_vector<int32_t>();
  for (size_t i = 0; i < params_.size(); ++i) {
    GAT_CHECK(steps[i] >= 0, "Optimizer::load_state_dict: parameter ", i, " has step count ", steps[i],
              " (negative)");
    for (const std::string& name : names) {
      const std::string key = name + "." + std::to_string(i);
      auto it = state.find(key);
      GAT_CHECK((it != state.end()) == (steps[i] > 0), "Optimizer::load_state_dict: parameter ", i, " has ",
                steps[i], " steps ", steps[i] > 0 ? "but no '" : "but a '", key, "'");
      if (it == state.end()) continue;
      const int64_t bad = first_non_finite(it->second);
      GAT_CHECK(bad < 0, "Optimizer::load_state_dict: '", key, "' holds a NaN or infinity (at flat index ",
                bad, ")");
      // The second buffer (Adam's exp_avg_sq) is a mean of squares: a negative value would make
      // its square root, and then the parameter, NaN at the next step.
      if (names.size() < 2 || name != names[1]) continue;
      const std::vector<double> values = it->second.to(Device::cpu).to(DType::f64).to_vector<double>();
      const auto negative = std::find_if(values.begin(), values.end(), [](double v) { return v < 0.0; });
      GAT_CHECK(negative == values.end(), "Optimizer::load_state_dict: '", key, "' holds ", *negative,
                " (at flat index ", negative - values.begin(), "), but it is a mean of squares (>= 0)");
    }
  }
  lr_ = rate;
  steps_.assign(steps.begin(), steps.end());
  std::vector<Tensor>* buffers[] = {&buffer1_, &buffer2_};
  for (size_t b = 0; b < names.size(); ++b)
    for (size_t i = 0; i < params_.size(); ++i) {
      auto it = state.find(names[b] + "." + std::to_string(i));
      Tensor& buffer = (*buffers[b])[i];
      if (it == state.end()) {
        buffer = Tensor();
        continue;
      }
      buffer = Tensor::empty(params_[i].shape(), params_[i].dtype(), params_[i].device(), "optimizer state");
      buffer.copy_(it->second);
    }
  device_steps_current_ = false;  // the device counters are uploaded again at the next CUDA step
  recorded_updates_.clear();
}

void Optimizer::apply(const optim::Rule& rule, int buffers) {
  autograd::NoGradGuard no_grad;
  std::vector<optim::Slot<float>> cuda_f32;
  std::vector<optim::Slot<double>> cuda_f64;
  bool any_cpu = false, any_cuda = false;
  for (const Tensor& p : params_)
    if (p.grad().defined()) (p.is_cuda() ? any_cuda : any_cpu) = true;
  if (any_cuda && !device_steps_current_) {  // the host counts before this step, uploaded
    const std::vector<int32_t> counts(steps_.begin(), steps_.end());
    device_steps_ = Tensor::from_vector(counts, {static_cast<int64_t>(counts.size())}).to(Device::cuda);
    device_steps_current_ = true;
  }
  if (any_cpu) device_steps_current_ = false;  // CPU steps are counted on the host only
  // While a CUDA graph records this step nothing runs: its replays count (count_replayed_step).
  const bool recording = cuda::capturing();
  if (recording) recorded_updates_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (recording) recorded_updates_[i] = true;
    GAT_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(),
              "Optimizer: gradient ", g.describe(), " does not match parameter ", i, " ", p.describe());
    if (buffers >= 1) ensure_buffer(buffer1_[i], p);
    if (buffers >= 2) ensure_buffer(buffer2_[i], p);
    p.mark_modified();  // a saved handle of p would no longer hold what the forward pass read
    const int64_t step = recording ? steps_[i] + 1 : ++steps_[i];
    dispatch_float(p.dtype(), "Optimizer", [&](auto zero) {
      using T = decltype(zero);
      const optim::Slot<T> slot{p.data<T>(),
                                g.data<T>(),
                                data_or_null<T>(buffer1_[i]),
                                data_or_null<T>(buffer2_[i]),
                                static_cast<long long>(p.numel()),
                                optim::scalars_for<T>(rule, step),
                                p.is_cuda() ? device_steps_.data<int32_t>() + i : nullptr};
      if (!p.is_cuda())
        cpu_step(slot);
      else if constexpr (std::is_same_v<T, float>)
        cuda_f32.push_back(slot);
      else
        cuda_f64.push_back(slot);
    });
  }
  if (!cuda_f32.empty()) GAT_CUDA_CALL(optim::cuda_impl::step(rule, cuda_f32));
  if (!cuda_f64.empty()) GAT_CUDA_CALL(optim::cuda_impl::step(rule, cuda_f64));
}

AdamFamily::AdamFamily(std::vector<Tensor> params, const AdamOptions& options, optim::Kind kind)
    : Optimizer(std::move(params), options.lr), options_(options), kind_(kind) {
  check_adam(kind == optim::Kind::adamw ? "AdamW" : "Adam", options.lr, options.beta1, options.beta2,
             options.eps, options.weight_decay);
}

void AdamFamily::step() {
  apply({kind_, lr(), options_.beta1, options_.beta2, options_.eps, options_.weight_decay, 0.0}, 2);
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  GAT_CHECK(options.lr >= 0, "SGD: invalid learning rate ", options.lr);
  GAT_CHECK(options.momentum >= 0, "SGD: invalid momentum ", options.momentum);
  GAT_CHECK(options.weight_decay >= 0, "SGD: invalid weight_decay ", options.weight_decay);
}

void SGD::step() {
  apply({optim::Kind::sgd, lr(), 0.0, 0.0, 0.0, options_.weight_decay, options_.momentum},
        options_.momentum != 0.0 ? 1 : 0);
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  GAT_CHECK(max_norm >= 0, "clip_grad_norm: invalid max_norm ", max_norm);
  autograd::NoGradGuard no_grad;
  double squares = 0.0;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) squares += ops::sum(ops::mul(g, g)).item();
  }
  const double total = std::sqrt(squares);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0)
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) g.copy_(ops::scale(g, coefficient));
    }
  return total;
}

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::start() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  optimizer_.set_lr(next_lr(optimizer_.lr()));
}

void LRScheduler::resume_at(int64_t epoch) {
  GAT_CHECK(epoch >= 0, "LRScheduler::resume_at: invalid epoch ", epoch);
  last_epoch_ = epoch;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  GAT_CHECK(step_size > 0, "StepLR: step_size ", step_size, " must be positive");
  GAT_CHECK(gamma >= 0, "StepLR: invalid gamma ", gamma);
  start();
}

double StepLR::next_lr(double current) const {
  if (last_epoch() == 0 || last_epoch() % step_size_ != 0) return current;
  return current * gamma_;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  GAT_CHECK(T_max > 0, "CosineAnnealingLR: T_max ", T_max, " must be positive");
  GAT_CHECK(eta_min >= 0, "CosineAnnealingLR: invalid eta_min ", eta_min);
  start();
}

double CosineAnnealingLR::next_lr(double current) const {
  const double pi = 3.14159265358979323846;  // math.pi
  const int64_t t = last_epoch();
  const double T = static_cast<double>(T_max_);
  if (t == 0) return current;
  if ((t - 1 - T_max_) % (2 * T_max_) == 0)
    return current + (base_lr() - eta_min_) * (1 - std::cos(pi / T)) / 2;
  return (1 + std::cos(pi * static_cast<double>(t) / T)) /
             (1 + std::cos(pi * static_cast<double>(t - 1) / T)) * (current - eta_min_) +
         eta_min_;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  GAT_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor ", start_factor,
            " must be in (0, 1]");
  GAT_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor ", end_factor, " must be in [0, 1]");
  GAT_CHECK(total_iters > 0, "LinearLR: total_iters ", total_iters, " must be positive");
  start();
}

double LinearLR::next_lr(double current) const {
  const int64_t t = last_epoch();
  if (t == 0) return current * start_factor_;
  if (t > total_iters_) return current;
  return current *
         (1 + (end_factor_ - start_factor_) / (static_cast<double>(total_iters_) * start_factor_ +
                                               static_cast<double>(t - 1) * (end_factor_ - start_factor_)));
}

}  // namespace gat
