// The per-element update rules of the optimisers (optim.h), shared by the CPU loop and the CUDA
// kernel so both devices run the same arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::optim {

enum class Kind : int32_t { adam, adamw, sgd, rmsprop, rmsprop_centered };

// The hyper-parameters of one step (host doubles). RMSprop's smoothing constant alpha is beta2:
// its square average is Adam's second moment, v = beta2 v + (1 - beta2) g^2.
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

// torch.lerp(start, end, weight): two forms, each exact at its own end.
template <class T>
GAT_HOST_DEVICE T lerp(T start, T end, T weight) {
  return weight < T(0.5) ? start + weight * (end - start) : end - (end - start) * (T(1) - weight);
}

// Adam's exp_avg_sq and RMSprop's square_avg: beta2 v + (1 - beta2) g^2.
template <class T>
GAT_HOST_DEVICE T square_average(const Scalars<T>& s, T v, T g) {
  return v * s.beta2 + (T(1) - s.beta2) * g * g;
}

// torch.optim.RMSprop: g += wd p;  v = square_average(v, g);  a = lerp(a, g, 1 - alpha) when
// centered;  d = sqrt(v - a^2 (centered) or v) + eps;  with momentum: m = momentum m + g / d,
// p -= lr m;  without: p -= lr g / d.
template <class T>
GAT_HOST_DEVICE void rmsprop_element(const Scalars<T>& s, T& p, T g, T& m, T& v, T& a) {
  if (s.weight_decay != T(0)) g = g + s.weight_decay * p;
  v = square_average(s, v, g);
  T d;
  if (s.kind == Kind::rmsprop_centered) {
    a = lerp(a, g, T(1) - s.beta2);
    d = std::sqrt(v + T(-1) * a * a) + s.eps;
  } else {
    d = std::sqrt(v) + s.eps;
  }
  if (s.momentum > T(0)) {
    m = m * s.momentum + g / d;
    p += -s.lr * m;
  } else {
    p += -s.lr * g / d;
  }
}

// One element: p (parameter), g (its gradient), m (exp_avg or momentum buffer), v (exp_avg_sq or
// square_avg), a (RMSprop's grad_avg). The operations and their order follow torch.optim's
// single-tensor implementations.
template <class T>
GAT_HOST_DEVICE void update_element(const Scalars<T>& s, T& p, T g, T& m, T& v, T& a) {
  if (s.kind == Kind::rmsprop || s.kind == Kind::rmsprop_centered) {
    rmsprop_element(s, p, g, m, v, a);
    return;
  }
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
  v = square_average(s, v, g);
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
  T* buffer3;     // (n,) or null
  long long n;
  Scalars<T> scalars;
  int32_t* step;  // CUDA: the update count before this step, or null
};

// Up to kMaxSlots parameters per launch: the slots travel as a kernel argument (< 4 KiB).
constexpr int kMaxSlots = 30;

namespace cuda_impl {  // optim.cu: launches over slots in batches of kMaxSlots
// Advances every slot's device counter, then updates with scalars_for(rule, counter).
void step(const Rule& rule, const std::vector<Slot<float>>& slots);
void step(const Rule& rule, const std::vector<Slot<double>>& slots);
}  // namespace cuda_impl

}  // namespace gat::optim
