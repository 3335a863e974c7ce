#include "gat/framework/optim.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

// The update of every element, a loop in the SIMD versions of parallel_for. Adam's and AdamW's
// (both buffers, the training programs' optimisers) are compiled with the kind and the buffers
// known, so that the loop has no branch and vectorises (a square root and two divisions per
// element, scalar, were a twentieth of a one-thread Cora epoch); the other rules test them per
// element. The same float operations either way.
template <class T>
void cpu_step(const optim::Slot<T>& slot) {
  T *param = slot.param, *b1 = slot.buffer1, *b2 = slot.buffer2, *b3 = slot.buffer3;
  const T* grad = slot.grad;
  auto run = [&](auto kind, auto with1, auto with2, auto with3) {
    optim::Scalars<T> scalars = slot.scalars;
    ops::detail::parallel_for(slot.n, [=](int64_t i) mutable {
      scalars.kind = kind;  // a constant, where kind is one
      T m = with1 ? b1[i] : T(0), v = with2 ? b2[i] : T(0), a = with3 ? b3[i] : T(0);
      optim::update_element(scalars, param[i], grad[i], m, v, a);
      if (with1) b1[i] = m;
      if (with2) b2[i] = v;
      if (with3) b3[i] = a;
    });
  };
  using optim::Kind;
  const std::true_type yes;
  const std::false_type no;
  const bool adam_buffers = b1 && b2 && !b3;
  if (slot.scalars.kind == Kind::adam && adam_buffers)
    return run(std::integral_constant<Kind, Kind::adam>{}, yes, yes, no);
  if (slot.scalars.kind == Kind::adamw && adam_buffers)
    return run(std::integral_constant<Kind, Kind::adamw>{}, yes, yes, no);
  run(slot.scalars.kind, b1 != nullptr, b2 != nullptr, b3 != nullptr);
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr, double weight_decay, const char* name) {
  for (size_t g = 0; g < groups.size(); ++g) {
    Group group{params_.size(), groups[g].params.size(), groups[g].lr.value_or(lr),
                groups[g].weight_decay.value_or(weight_decay)};
    GAT_CHECK(std::isfinite(group.lr) && group.lr >= 0, name, ": invalid learning rate ", group.lr,
              " in parameter group ", g);
    GAT_CHECK(std::isfinite(group.weight_decay) && group.weight_decay >= 0, name, ": invalid weight_decay ",
              group.weight_decay, " in parameter group ", g);
    for (Tensor& p : groups[g].params) {
      const size_t i = params_.size();
      check_float(name, "parameter", p);
      GAT_CHECK(p.requires_grad() && !p.impl().grad_fn, name, ": parameter ", i, " ", p.describe(),
                " is not a leaf that requires grad");
      for (size_t j = 0; j < i; ++j)
        GAT_CHECK(&params_[j].impl() != &p.impl(), name, ": parameter ", i, " is parameter ", j,
                  " again (a parameter belongs to one group, once)");
      params_.push_back(std::move(p));
    }
    groups_.push_back(group);
  }
  for (std::vector<Tensor>& buffers : buffers_) buffers.resize(params_.size());
  steps_.assign(params_.size(), 0);
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

void Optimizer::count_replayed_step() {
  GAT_CHECK(recorded_updates_.size() == params_.size(),
            "Optimizer::count_replayed_step: no step was recorded in a CUDA graph");
  for (size_t i = 0; i < params_.size(); ++i) steps_[i] += recorded_updates_[i] ? 1 : 0;
}

size_t Optimizer::single_group(const char* what) const {
  GAT_CHECK(groups_.size() == 1, "Optimizer::", what, ": the optimiser has ", groups_.size(),
            " parameter groups: name the group");
  return 0;
}

void Optimizer::set_lr(size_t group, double lr) {
  GAT_CHECK(group < groups_.size(), "Optimizer::set_lr: no parameter group ", group, " (", groups_.size(),
            " groups)");
  GAT_CHECK(std::isfinite(lr) && lr >= 0, "Optimizer::set_lr: invalid learning rate ", lr);
  groups_[group].lr = lr;
}

const std::vector<double>& Optimizer::initial_lrs() {
  if (initial_lrs_.empty())
    for (const Group& group : groups_) initial_lrs_.push_back(group.lr);
  return initial_lrs_;
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> state;
  std::vector<double> rates;
  for (const Group& group : groups_) rates.push_back(group.lr);
  state.emplace("lr", rates.size() == 1 ? Tensor::scalar(rates[0], DType::f64)
                                        : Tensor::from_vector(rates, {static_cast<int64_t>(rates.size())}));
  std::vector<int32_t> steps(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    GAT_CHECK(steps_[i] <= INT32_MAX, "Optimizer::state_dict: step count ", steps_[i], " of parameter ", i,
              " does not fit the checkpoint's i32");
    steps[i] = static_cast<int32_t>(steps_[i]);
  }
  state.emplace("step", Tensor::from_vector(steps, {static_cast<int64_t>(steps.size())}));
  const std::vector<std::string> names = buffer_names();
  for (size_t b = 0; b < names.size(); ++b)
    for (size_t i = 0; i < params_.size(); ++i)
      if (buffers_[b][i].defined()) state.emplace(names[b] + "." + std::to_string(i), buffers_[b][i].clone());
  return state;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  auto lookup = [&](const std::string& name) -> const Tensor& {
    auto it = state.find(name);
    GAT_CHECK(it != state.end(), "Optimizer::load_state_dict: missing '", name, "'");
    return it->second;
  };
  const Tensor& lr = lookup("lr");
  const size_t saved_groups = lr.shape().empty() ? 1 : static_cast<size_t>(lr.shape()[0]);
  GAT_CHECK(saved_groups == groups_.size(), "Optimizer::load_state_dict: 'lr' ", lr.describe(),
            " holds the rates of ", saved_groups, " parameter groups, but this optimiser has ",
            groups_.size());
  check_shape("Optimizer::load_state_dict", "lr", lr,
              groups_.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(groups_.size())});
  check_dtype("Optimizer::load_state_dict", "lr", lr, DType::f64);
  const Tensor& step = lookup("step");
  check_shape("Optimizer::load_state_dict", "step", step, {static_cast<int64_t>(params_.size())});
  check_dtype("Optimizer::load_state_dict", "step", step, DType::i32);
  std::vector<std::string> names = buffer_names();
  size_t expected = 2;  // lr and step, then every buffer, each checked against its parameter
  for (const std::string& name : names)
    for (size_t i = 0; i < params_.size() && !name.empty(); ++i) {
      auto it = state.find(name + "." + std::to_string(i));
      if (it == state.end()) continue;
      ++expected;
      GAT_CHECK(it->second.shape() == params_[i].shape() && it->second.dtype() == params_[i].dtype(),
                "Optimizer::load_state_dict: '", it->first, "' is ", it->second.describe(), " but parameter ",
                i, " is ", params_[i].describe());
    }
  std::string used;  // the buffers' names, for the error below
  for (const std::string& name : names)
    if (!name.empty()) used += (used.empty() ? "" : ", ") + name;
  GAT_CHECK(expected == state.size(), "Optimizer::load_state_dict: ", state.size() - expected,
            " entries are not state of this optimiser (", used.empty() ? "no buffers" : used, " over ",
            params_.size(), " parameters)");
  // The values too: a state this optimiser could have reached. A parameter has its buffers from
  // its first update on, so it holds all of them exactly when its step count is positive.
  const std::vector<double> rates = lr.to(Device::cpu).to_vector<double>();
  for (double rate : rates)
    GAT_CHECK(std::isfinite(rate) && rate >= 0.0, "Optimizer::load_state_dict: lr ", rate,
              " is not a finite number >= 0");
  const std::vector<int32_t> steps = step.to(Device::cpu).to_vector<int32_t>();
  for (size_t i = 0; i < params_.size(); ++i) {
    GAT_CHECK(steps[i] >= 0, "Optimizer::load_state_dict: parameter ", i, " has step count ", steps[i],
              " (negative)");
    for (const std::string& name : names) {
      if (name.empty()) continue;
      const std::string key = name + "." + std::to_string(i);
      auto it = state.find(key);
      GAT_CHECK((it != state.end()) == (steps[i] > 0), "Optimizer::load_state_dict: parameter ", i, " has ",
                steps[i], " steps ", steps[i] > 0 ? "but no '" : "but a '", key, "'");
      if (it == state.end()) continue;
      const int64_t bad = first_non_finite(it->second);
      GAT_CHECK(bad < 0, "Optimizer::load_state_dict: '", key, "' holds a NaN or infinity (at flat index ",
                bad, ")");
      // The second buffer (Adam's exp_avg_sq, RMSprop's square_avg) is a mean of squares: a negative value
      // would make its square root, and then the parameter, NaN at the next step.
      if (names.size() < 2 || name != names[1]) continue;
      const std::vector<double> values = it->second.to(Device::cpu).to(DType::f64).to_vector<double>();
      const auto negative = std::find_if(values.begin(), values.end(), [](double v) { return v < 0.0; });
      GAT_CHECK(negative == values.end(), "Optimizer::load_state_dict: '", key, "' holds ", *negative,
                " (at flat index ", negative - values.begin(), "), but it is a mean of squares (>= 0)");
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].lr = rates[g];
  steps_.assign(steps.begin(), steps.end());
  for (size_t b = 0; b < names.size(); ++b)
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& buffer = buffers_[b][i];
      auto it = names[b].empty() ? state.end() : state.find(names[b] + "." + std::to_string(i));
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

void Optimizer::apply(optim::Rule rule) {
  autograd::NoGradGuard no_grad;
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
  const std::vector<std::string> names = buffer_names();
  for (const Group& group : groups_) {
    rule.lr = group.lr;
    rule.weight_decay = group.weight_decay;
    std::vector<optim::Slot<float>> cuda_f32;
    std::vector<optim::Slot<double>> cuda_f64;
    for (size_t i = group.first; i < group.first + group.count; ++i) {
      const Tensor& p = params_[i];
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      if (recording) recorded_updates_[i] = true;
      GAT_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(),
                "Optimizer: gradient ", g.describe(), " does not match parameter ", i, " ", p.describe());
      for (size_t b = 0; b < names.size(); ++b)
        if (!names[b].empty()) ensure_buffer(buffers_[b][i], p);
      p.mark_modified();  // a saved handle of p would no longer hold what the forward pass read
      const int64_t step = recording ? steps_[i] + 1 : ++steps_[i];
      dispatch_float(p.dtype(), "Optimizer", [&](auto zero) {
        using T = decltype(zero);
        const optim::Slot<T> slot{p.data<T>(),
                                  g.data<T>(),
                                  data_or_null<T>(buffers_[0][i]),
                                  data_or_null<T>(buffers_[1][i]),
                                  data_or_null<T>(buffers_[2][i]),
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
}

AdamFamily::AdamFamily(std::vector<ParamGroup> groups, const AdamOptions& options, optim::Kind kind)
    : Optimizer(std::move(groups), options.lr, options.weight_decay,
                kind == optim::Kind::adamw ? "AdamW" : "Adam"),
      options_(options),
      kind_(kind) {
  check_adam(kind == optim::Kind::adamw ? "AdamW" : "Adam", options.lr, options.beta1, options.beta2,
             options.eps, options.weight_decay);
}

void AdamFamily::step() { apply({kind_, 0.0, options_.beta1, options_.beta2, options_.eps, 0.0, 0.0}); }

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "SGD"), options_(options) {
  GAT_CHECK(options.lr >= 0, "SGD: invalid learning rate ", options.lr);
  GAT_CHECK(options.momentum >= 0, "SGD: invalid momentum ", options.momentum);
  GAT_CHECK(options.weight_decay >= 0, "SGD: invalid weight_decay ", options.weight_decay);
}

void SGD::step() { apply({optim::Kind::sgd, 0.0, 0.0, 0.0, 0.0, 0.0, options_.momentum}); }

std::vector<std::string> SGD::buffer_names() const {
  return {options_.momentum != 0.0 ? "momentum_buffer" : "", "", ""};
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "RMSprop"), options_(options) {
  GAT_CHECK(options.lr >= 0, "RMSprop: invalid learning rate ", options.lr);
  GAT_CHECK(options.alpha >= 0 && options.alpha <= 1, "RMSprop: invalid alpha ", options.alpha,
            " (must be in [0, 1])");
  GAT_CHECK(options.eps >= 0, "RMSprop: invalid eps ", options.eps);
  GAT_CHECK(options.momentum >= 0, "RMSprop: invalid momentum ", options.momentum);
  GAT_CHECK(options.weight_decay >= 0, "RMSprop: invalid weight_decay ", options.weight_decay);
}

void RMSprop::step() {
  apply({options_.centered ? optim::Kind::rmsprop_centered : optim::Kind::rmsprop, 0.0, 0.0, options_.alpha,
         options_.eps, 0.0, options_.momentum});
}

std::vector<std::string> RMSprop::buffer_names() const {
  return {options_.momentum > 0.0 ? "momentum_buffer" : "", "square_avg",
          options_.centered ? "grad_avg" : ""};
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

LRScheduler::LRScheduler(Optimizer& optimizer, Formulas formulas)
    : optimizer_(optimizer), base_lrs_(optimizer.initial_lrs()), formulas_(std::move(formulas)) {
  step();
}

void LRScheduler::step() {
  ++last_epoch_;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    optimizer_.set_lr(g, formulas_.next_lr(last_epoch_, optimizer_.lr(g), base_lrs_[g]));
}

void LRScheduler::restart() {
  last_epoch_ = 0;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    optimizer_.set_lr(g, formulas_.closed_form_lr(last_epoch_, base_lrs_[g]));
}

void LRScheduler::resume_at(int64_t epoch) {
  GAT_CHECK(epoch >= 0, "LRScheduler::resume_at: invalid epoch ", epoch);
  last_epoch_ = epoch;
}

namespace {

constexpr double kPi = 3.14159265358979323846;  // math.pi

// Each scheduler's arguments checked, and its formulas (torch's).

using Formulas = LRScheduler::Formulas;

Formulas step_lr(int64_t step_size, double gamma) {
  GAT_CHECK(step_size > 0, "StepLR: step_size ", step_size, " must be positive");
  GAT_CHECK(gamma >= 0, "StepLR: invalid gamma ", gamma);
  return {[=](int64_t epoch, double current, double) {
            if (epoch == 0 || epoch % step_size != 0) return current;
            return current * gamma;
          },
          [=](int64_t epoch, double base) {
            return base * std::pow(gamma, static_cast<double>(epoch / step_size));
          }};
}

Formulas cosine_annealing_lr(int64_t T_max, double eta_min) {
  GAT_CHECK(T_max > 0, "CosineAnnealingLR: T_max ", T_max, " must be positive");
  GAT_CHECK(eta_min >= 0, "CosineAnnealingLR: invalid eta_min ", eta_min);
  return {[=](int64_t t, double current, double base) {
            const double T = static_cast<double>(T_max);
            if (t == 0) return current;
            if ((t - 1 - T_max) % (2 * T_max) == 0)
              return current + (base - eta_min) * (1 - std::cos(kPi / T)) / 2;
            return (1 + std::cos(kPi * static_cast<double>(t) / T)) /
                       (1 + std::cos(kPi * static_cast<double>(t - 1) / T)) * (current - eta_min) +
                   eta_min;
          },
          [=](int64_t epoch, double base) {
            return eta_min +
                   (base - eta_min) *
                       (1 + std::cos(kPi * static_cast<double>(epoch) / static_cast<double>(T_max))) / 2;
          }};
}

Formulas linear_lr(double start_factor, double end_factor, int64_t total_iters) {
  GAT_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: start_factor ", start_factor,
            " must be in (0, 1]");
  GAT_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: end_factor ", end_factor, " must be in [0, 1]");
  GAT_CHECK(total_iters > 0, "LinearLR: total_iters ", total_iters, " must be positive");
  return {[=](int64_t t, double current, double) {
            if (t == 0) return current * start_factor;
            if (t > total_iters) return current;
            return current * (1 + (end_factor - start_factor) /
                                      (static_cast<double>(total_iters) * start_factor +
                                       static_cast<double>(t - 1) * (end_factor - start_factor)));
          },
          [=](int64_t epoch, double base) {
            return base * (start_factor + (end_factor - start_factor) *
                                              static_cast<double>(std::min(total_iters, epoch)) /
                                              static_cast<double>(total_iters));
          }};
}

}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, step_lr(step_size, gamma)) {}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer, cosine_annealing_lr(T_max, eta_min)) {}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer, linear_lr(start_factor, end_factor, total_iters)) {}

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  GAT_CHECK(!schedulers_.empty(), "SequentialLR: no schedulers");
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    GAT_CHECK(schedulers_[k] != nullptr, "SequentialLR: scheduler ", k, " is null");
    GAT_CHECK(&schedulers_[k]->optimizer() == &optimizer, "SequentialLR: scheduler ", k,
              " drives another optimiser");
  }
  GAT_CHECK(milestones_.size() + 1 == schedulers_.size(), "SequentialLR: ", schedulers_.size(),
            " schedulers need ", schedulers_.size() - 1, " milestones, not ", milestones_.size());
  for (size_t k = 0; k < milestones_.size(); ++k)
    GAT_CHECK(milestones_[k] > 0 && (k == 0 || milestones_[k] > milestones_[k - 1]),
              "SequentialLR: milestones must be positive and ascending (milestone ", k, " is ",
              milestones_[k], ")");
  // torch: the rates back to the base rates, every scheduler's initial step undone, and the first
  // scheduler's epoch 0 run again.
  const std::vector<double>& base = optimizer.initial_lrs();
  for (size_t g = 0; g < base.size(); ++g) optimizer.set_lr(g, base[g]);
  for (auto& scheduler : schedulers_) scheduler->last_epoch_ -= 1;
  schedulers_[0]->step();
}

void SequentialLR::step() {
  ++last_epoch_;
  // bisect_right: the scheduler after every milestone <= last_epoch.
  const size_t k = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                       milestones_.begin());
  if (k > 0 && milestones_[k - 1] == last_epoch_)
    schedulers_[k]->restart();
  else
    schedulers_[k]->step();
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const Options& options)
    : optimizer_(optimizer),
      options_(options),
      best_(options.mode == Options::Mode::min ? std::numeric_limits<double>::infinity()
                                               : -std::numeric_limits<double>::infinity()) {
  GAT_CHECK(options.factor >= 0 && options.factor < 1, "ReduceLROnPlateau: factor ", options.factor,
            " must be in [0, 1)");
  GAT_CHECK(options.patience >= 0, "ReduceLROnPlateau: invalid patience ", options.patience);
  GAT_CHECK(options.cooldown >= 0, "ReduceLROnPlateau: invalid cooldown ", options.cooldown);
  GAT_CHECK(std::isfinite(options.threshold) && options.threshold >= 0 &&
                (options.threshold < 1 || options.threshold_mode == Options::Threshold::abs ||
                 options.mode == Options::Mode::max),
            "ReduceLROnPlateau: invalid threshold ", options.threshold,
            " (>= 0, and below 1 for a relative one in mode min)");
  GAT_CHECK(std::isfinite(options.min_lr) && options.min_lr >= 0, "ReduceLROnPlateau: invalid min_lr ",
            options.min_lr);
  GAT_CHECK(std::isfinite(options.eps) && options.eps >= 0, "ReduceLROnPlateau: invalid eps ", options.eps);
}

bool ReduceLROnPlateau::is_better(double metric) const {
  const bool rel = options_.threshold_mode == Options::Threshold::rel;
  if (options_.mode == Options::Mode::min)
    return rel ? metric < best_ * (1.0 - options_.threshold) : metric < best_ - options_.threshold;
  return rel ? metric > best_ * (options_.threshold + 1.0) : metric > best_ + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  GAT_CHECK(std::isfinite(metric), "ReduceLROnPlateau::step: the metric is ", metric, " (not finite)");
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown are not counted
  }
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < optimizer_.num_groups(); ++g) {
      const double old_lr = optimizer_.lr(g);
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
      if (old_lr - new_lr > options_.eps) optimizer_.set_lr(g, new_lr);
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
}

}  // namespace gat
