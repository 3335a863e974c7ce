// The pointwise functions of unary.h for one element, written once for the CPU kernels
// (unary.cpp) and the CUDA ones (unary.cu; included by those two only). The formulas are
// PyTorch's (torch/csrc/autograd/FunctionsManual.cpp and aten's CPU kernels), so the values at
// the edges are torch's (unary.h), but for GELU's gates, which are written to keep their digits.
#pragma once

#include <cmath>
#include <type_traits>

#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/ops/unary.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::ops::detail {

// A UnaryFn's parameters in the element type T.
template <class T>
struct UnaryParams {
  T beta, threshold, exponent, min, max;
  explicit UnaryParams(const UnaryFn& fn)
      : beta(static_cast<T>(fn.beta)),
        threshold(static_cast<T>(fn.threshold)),
        exponent(static_cast<T>(fn.exponent)),
        min(static_cast<T>(fn.min)),
        max(static_cast<T>(fn.max)) {}
};

// exp on the device is the CUDA library's; on the CPU, vec_exp, which a loop vectorises in f32.
template <class T>
GAT_HOST_DEVICE T unary_exp(T x) {
#if defined(__CUDA_ARCH__)
  return std::exp(x);
#else
  return vec_exp(x);
#endif
}

// min(max(x, lo), hi), with NaN passed on (every comparison with it is false).
template <class T>
GAT_HOST_DEVICE T clamp_value(T x, T lo, T hi) {
  const T low = x < lo ? lo : x;
  return low > hi ? hi : low;
}

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluTanhCubic = 0.044715;              // the cubic term of the tanh form

// GELU's two gates, written so that they keep every digit for x < 0, where torch's forms
// subtract nearly equal numbers (torch's f64 gelu(-5) keeps 10 of 16 digits and gelu(-8) two; its
// f32 gelu(-5) one). The functions are torch's; their values differ by torch's rounding.
//   Phi(x) = (1 + erf(x / sqrt 2)) / 2 = erfc(-x / sqrt 2) / 2
template <class T>
GAT_HOST_DEVICE T normal_cdf(T x) {
  return T(0.5) * std::erfc(-x * T(kSqrtHalf));
}
//   (1 + tanh(u)) / 2 = sigmoid(2 u), u = sqrt(2/pi) (x + 0.044715 x^3)
template <class T>
GAT_HOST_DEVICE T gelu_tanh_gate(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluTanhCubic) * x * x * x);
  return T(1) / (T(1) + unary_exp(T(-2) * u));
}

// out = op(x).
template <UnaryOp kOp, class T>
GAT_HOST_DEVICE T unary_value(T x, const UnaryParams<T>& p) {
  if constexpr (kOp == UnaryOp::exp) {
    return unary_exp(x);
  } else if constexpr (kOp == UnaryOp::log) {
    return std::log(x);
  } else if constexpr (kOp == UnaryOp::sigmoid) {
    return T(1) / (T(1) + unary_exp(-x));
  } else if constexpr (kOp == UnaryOp::tanh) {
    return std::tanh(x);
  } else if constexpr (kOp == UnaryOp::relu6) {
    return clamp_value(x, T(0), T(6));
  } else if constexpr (kOp == UnaryOp::gelu) {
    return x * normal_cdf(x);
  } else if constexpr (kOp == UnaryOp::gelu_tanh) {
    return x * gelu_tanh_gate(x);
  } else if constexpr (kOp == UnaryOp::silu) {
    return x / (T(1) + unary_exp(-x));
  } else if constexpr (kOp == UnaryOp::softplus) {
    const T bx = x * p.beta;
    return bx > p.threshold ? x : std::log1p(unary_exp(bx)) / p.beta;
  } else if constexpr (kOp == UnaryOp::sqrt) {
    return std::sqrt(x);
  } else if constexpr (kOp == UnaryOp::pow) {
    return std::pow(x, p.exponent);
  } else {
    static_assert(kOp == UnaryOp::clamp);
    return clamp_value(x, p.min, p.max);
  }
}

// d x from the upstream gradient g and `saved`: the forward's output where
// unary_backward_reads_output(kOp), else its input.
template <UnaryOp kOp, class T>
GAT_HOST_DEVICE T unary_gradient(T saved, T g, const UnaryParams<T>& p) {
  if constexpr (kOp == UnaryOp::exp) {
    return g * saved;
  } else if constexpr (kOp == UnaryOp::log) {
    return g / saved;
  } else if constexpr (kOp == UnaryOp::sigmoid) {
    return g * saved * (T(1) - saved);
  } else if constexpr (kOp == UnaryOp::tanh) {
    return g * (T(1) - saved * saved);
  } else if constexpr (kOp == UnaryOp::relu6) {
    return saved <= T(0) || saved >= T(6) ? T(0) : g;
  } else if constexpr (kOp == UnaryOp::gelu) {
    const T x = saved, pdf = unary_exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
    return g * (normal_cdf(x) + x * pdf);
  } else if constexpr (kOp == UnaryOp::gelu_tanh) {
    // d/dx x s(2u) = s + 2 x s (1 - s) du/dx: torch's 1/2 (1 + t) + x/2 (1 - t^2) du/dx.
    const T x = saved, s = gelu_tanh_gate(x);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
    return g * (s + T(2) * x * s * (T(1) - s) * du);
  } else if constexpr (kOp == UnaryOp::silu) {
    const T x = saved, s = T(1) / (T(1) + unary_exp(-x));
    return g * s * (T(1) + x * (T(1) - s));
  } else if constexpr (kOp == UnaryOp::softplus) {
    const T bx = saved * p.beta;
    const T z = unary_exp(bx);
    return bx > p.threshold ? g : g * z / (z + T(1));
  } else if constexpr (kOp == UnaryOp::sqrt) {
    return g / (T(2) * saved);
  } else if constexpr (kOp == UnaryOp::pow) {
    return p.exponent == T(0) ? T(0) : g * (p.exponent * std::pow(saved, p.exponent - T(1)));
  } else {
    static_assert(kOp == UnaryOp::clamp);
    return saved >= p.min && saved <= p.max ? g : T(0);
  }
}

// f(std::integral_constant<UnaryOp, op>{}): a kernel instantiated for the op chosen at run time.
template <class F>
void with_unary_op(UnaryOp op, F&& f) {
  using O = UnaryOp;
  switch (op) {
    case O::exp:
      return f(std::integral_constant<O, O::exp>{});
    case O::log:
      return f(std::integral_constant<O, O::log>{});
    case O::sigmoid:
      return f(std::integral_constant<O, O::sigmoid>{});
    case O::tanh:
      return f(std::integral_constant<O, O::tanh>{});
    case O::relu6:
      return f(std::integral_constant<O, O::relu6>{});
    case O::gelu:
      return f(std::integral_constant<O, O::gelu>{});
    case O::gelu_tanh:
      return f(std::integral_constant<O, O::gelu_tanh>{});
    case O::silu:
      return f(std::integral_constant<O, O::silu>{});
    case O::softplus:
      return f(std::integral_constant<O, O::softplus>{});
    case O::sqrt:
      return f(std::integral_constant<O, O::sqrt>{});
    case O::pow:
      return f(std::integral_constant<O, O::pow>{});
    case O::clamp:
      return f(std::integral_constant<O, O::clamp>{});
  }
}

}  // namespace gat::ops::detail
