#include "gat/framework/optim.h"

#include <type_traits>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/dispatch.h"

namespace gat {

namespace {

void check_adam(const char* name, double lr, double beta1, double beta2, double eps, double wd) {
  GAT_CHECK(lr >= 0, name, ": invalid learning rate ", lr);
  GAT_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, name, ": invalid betas (", beta1,
            ", ", beta2, "), each must be in [0, 1)");
  GAT_CHECK(eps >= 0, name, ": invalid eps ", eps);
  GAT_CHECK(wd >= 0, name, ": invalid weight_decay ", wd);
}

// A state buffer for `param`: zeros on the parameter's device, created on first use and moved
// along when the parameter has moved.
void ensure_buffer(Tensor& buffer, const Tensor& param) {
  if (!buffer.defined()) buffer = Tensor::zeros(param.shape(), param.dtype(), param.device());
  else buffer.move_to_(param.device());
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <class T>
void cpu_step(const optim::Slot<T>& slot) {
  const long long n = slot.n;
#pragma omp parallel for if (n > 65536)
  for (long long i = 0; i < n; ++i) {
    T m = slot.buffer1 ? slot.buffer1[i] : T(0), v = slot.buffer2 ? slot.buffer2[i] : T(0);
    optim::update_element(slot.scalars, slot.param[i], slot.grad[i], m, v);
    if (slot.buffer1) slot.buffer1[i] = m;
    if (slot.buffer2) slot.buffer2[i] = v;
  }
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params)
    : params_(std::move(params)), buffer1_(params_.size()), buffer2_(params_.size()), steps_(params_.size(), 0) {
  for (size_t i = 0; i < params_.size(); ++i) {
    check_float("Optimizer", "parameter", params_[i]);
    GAT_CHECK(params_[i].requires_grad() && !params_[i].impl().grad_fn, "Optimizer: parameter ", i,
              " ", params_[i].describe(), " is not a leaf that requires grad");
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
    const int64_t step = recording ? steps_[i] + 1 : ++steps_[i];
    dispatch_float(p.dtype(), "Optimizer", [&](auto zero) {
      using T = decltype(zero);
      const optim::Slot<T> slot{p.data<T>(), g.data<T>(), data_or_null<T>(buffer1_[i]),
                                data_or_null<T>(buffer2_[i]), static_cast<long long>(p.numel()),
                                optim::scalars_for<T>(rule, step),
                                p.is_cuda() ? device_steps_.data<int32_t>() + i : nullptr};
      if (!p.is_cuda()) cpu_step(slot);
      else if constexpr (std::is_same_v<T, float>) cuda_f32.push_back(slot);
      else cuda_f64.push_back(slot);
    });
  }
  if (!cuda_f32.empty()) GAT_CUDA_CALL(optim::cuda_impl::step(rule, cuda_f32));
  if (!cuda_f64.empty()) GAT_CUDA_CALL(optim::cuda_impl::step(rule, cuda_f64));
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Optimizer(std::move(params)), options_(options) {
  check_adam("Adam", options.lr, options.beta1, options.beta2, options.eps, options.weight_decay);
}

void Adam::step() {
  apply({optim::Kind::adam, options_.lr, options_.beta1, options_.beta2, options_.eps,
         options_.weight_decay, 0.0},
        2);
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Optimizer(std::move(params)), options_(options) {
  check_adam("AdamW", options.lr, options.beta1, options.beta2, options.eps, options.weight_decay);
}

void AdamW::step() {
  apply({optim::Kind::adamw, options_.lr, options_.beta1, options_.beta2, options_.eps,
         options_.weight_decay, 0.0},
        2);
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : Optimizer(std::move(params)), options_(options) {
  GAT_CHECK(options.lr >= 0, "SGD: invalid learning rate ", options.lr);
  GAT_CHECK(options.momentum >= 0, "SGD: invalid momentum ", options.momentum);
  GAT_CHECK(options.weight_decay >= 0, "SGD: invalid weight_decay ", options.weight_decay);
}

void SGD::step() {
  apply({optim::Kind::sgd, options_.lr, 0.0, 0.0, 0.0, options_.weight_decay, options_.momentum},
        options_.momentum != 0.0 ? 1 : 0);
}

}  // namespace gat
