// The per-element update rules of the optimisers (optim.h), shared by the CPU loop and the CUDA
// kernel so both devices run the same arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::optim {

enum class Kind : int32_t { adam, adamw, sgd };

// The hyper-parameters of one step (host doubles).
struct Rule {
  Kind kind = Kind::adam;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0, momentum = 0;
};

// Everything one parameter's elements need for one step, in the parameter's scalar type.
template <class T>
struct Scalars {
  Kind kind;
  T lr, beta1, beta2, eps, weight_decay, momentum;
  T step_size;              // Adam(W): lr / (1 - beta1^t)
  T bias_correction2_sqrt;  // Adam(W): sqrt(1 - beta2^t)
};

template <class T>
GAT_HOST_DEVICE Scalars<T> scalars_for(const Rule& rule, int64_t step) {
  const double t = static_cast<double>(step);
  return Scalars<T>{rule.kind,
                    static_cast<T>(rule.lr),
                    static_cast<T>(rule.beta1),
                    static_cast<T>(rule.beta2),
                    static_cast<T>(rule.eps),
                    static_cast<T>(rule.weight_decay),
                    static_cast<T>(rule.momentum),
                    static_cast<T>(rule.lr / (1.0 - ::pow(rule.beta1, t))),
                    static_cast<T>(::sqrt(1.0 - ::pow(rule.beta2, t)))};
}

// One element: p (parameter), g (its gradient), m (exp_avg or momentum buffer), v (exp_avg_sq).
// The operations and their order follow torch.optim's single-tensor implementations.
template <class T>
GAT_HOST_DEVICE void update_element(const Scalars<T>& s, T& p, T g, T& m, T& v) {
  if (s.kind == Kind::sgd) {
    if (s.weight_decay != T(0)) g += s.weight_decay * p;
    if (s.momentum != T(0)) {
      m = m * s.momentum + g;  // the buffer starts at zero, so the first step gives m = g
      g = m;
    }
    p += -s.lr * g;
    return;
  }
  if (s.kind == Kind::adamw)
    p *= T(1) - s.lr * s.weight_decay;
  else if (s.weight_decay != T(0))
    g += s.weight_decay * p;
  m += (T(1) - s.beta1) * (g - m);  // lerp(m, g, 1 - beta1)
  v = v * s.beta2 + (T(1) - s.beta2) * g * g;
  const T denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
  p += -s.step_size * m / denom;
}

// One parameter for one step. On CUDA, `step` is the parameter's update counter on the device:
// the kernel advances it and derives the scalars from it, so a step recorded in a CUDA graph
// uses the right bias corrections at every replay. On the CPU (step null) `scalars` hold them.
template <class T>
struct Slot {
  T* param;       // (n,)
  const T* grad;  // (n,)
  T* buffer1;     // (n,) or null
  T* buffer2;     // (n,) or null
  long long n;
  Scalars<T> scalars;
  int32_t* step;  // CUDA: the update count before this step, or null
};

// Up to kMaxSlots parameters per launch: the slots travel as a kernel argument (< 4 KiB).
constexpr int kMaxSlots = 32;

namespace cuda_impl {  // optim.cu: launches over slots in batches of kMaxSlots
// Advances every slot's device counter, then updates with scalars_for(rule, counter).
void step(const Rule& rule, const std::vector<Slot<float>>& slots);
void step(const Rule& rule, const std::vector<Slot<double>>& slots);
}  // namespace cuda_impl

}  // namespace gat::optim
