// Pointwise functions with autograd (f32/f64, CPU and CUDA). x: any shape -> the same shape.
// PyTorch's functions and gradients, edges included (tests/test_ops_elementwise.cpp holds torch
// 2.11's values at the edges).
//
//   exp(x)
//   log(x)         natural logarithm (-inf at 0, NaN below)
//   sigmoid(x)   = 1 / (1 + exp(-x))   (0 and 1 in the limits, never NaN)
//   tanh(x)
//   relu6(x)     = min(max(x, 0), 6)
//   gelu(x)      = x Phi(x) = x/2 (1 + erf(x / sqrt 2))                       (GeluApproximate::none)
//                ~ x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)        (GeluApproximate::tanh)
//   silu(x)      = x / (1 + exp(-x))
//   softplus(x, beta, threshold) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
//   sqrt(x)        (NaN below 0)
//   pow(x, p)    = x^p for a scalar p: NaN for x < 0 and p not an integer, as torch (the op does
//                  not read x to refuse it: that would wait for the device)
//   clamp(x, min, max) = min(max(x, min), max), either bound optional; min > max gives max
//                  everywhere, as torch
// NaN in x gives NaN out, for every function. gelu's two forms are computed as
// x erfc(-x / sqrt 2) / 2 and x sigmoid(2u): the same functions as torch's forms above, which
// lose most digits for x < 0 by cancellation; these keep them (detail/unary_functions.h).
//
// Backward (g = d out, y = out):
//   exp: g y   log: g / x   sigmoid: g y (1 - y)   tanh: g (1 - y^2)
//   relu6:     g for 0 < x < 6, else 0: 0 at both kinks (torch's hardtanh); a NaN x passes g
//   gelu none: g (Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi))
//   gelu tanh: g (1/2 (1 + t) + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 0.044715 x^2)), t = tanh(u)
//   silu:      g s (1 + x (1 - s)), s = sigmoid(x)
//   softplus:  g where beta x > threshold (the linear part), else g z / (z + 1), z = exp(beta x)
//   sqrt:      g / (2 y): at x = 0 that is +inf for g > 0, -inf for g < 0 and NaN for g = 0
//   pow:       g p x^(p - 1): 0 everywhere for p = 0 (x = 0 included); at x = 0, inf for 0 < p < 1
//              and -inf for p = -1 (g = 1)
//   clamp:     g where min <= x <= max (inclusive at the bounds), else 0 (a NaN x too)
//
// Errors (gat::Error naming the op and the argument): x not f32/f64; softplus with beta 0 or not
// finite, or a NaN threshold; pow with an exponent not finite; clamp with neither bound, or a NaN
// one.
#pragma once

#include <cmath>
#include <optional>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

enum class GeluApproximate { none, tanh };  // PyTorch's approximate='none' | 'tanh'

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

enum class UnaryOp { exp, log, sigmoid, tanh, relu6, gelu, gelu_tanh, silu, softplus, sqrt, pow, clamp };

// A pointwise function and its parameters; each op reads only its own.
struct UnaryFn {
  UnaryOp op = UnaryOp::exp;
  double beta = 1.0, threshold = 20.0;     // softplus
  double exponent = 1.0;                   // pow
  double min = -INFINITY, max = INFINITY;  // clamp (an absent bound is infinite)
};

// Whether the backward pass reads the forward's output (exp, sigmoid, tanh, sqrt) or its input
// (the others). The autograd entry keeps that one tensor alone.
constexpr bool unary_backward_reads_output(UnaryOp op) {
  return op == UnaryOp::exp || op == UnaryOp::sigmoid || op == UnaryOp::tanh || op == UnaryOp::sqrt;
}

// ---- the kernels: every tensor of x's shape and dtype, outputs allocated by the caller ----
//  forward:  out = fn(x)
//  backward: grad_x from grad_out and `saved`, the forward's out where
//            unary_backward_reads_output(fn.op), else its x
GAT_DECLARE_KERNEL_FN(unary_forward, (const UnaryFn& fn, const Tensor& x, Tensor& out))
GAT_DECLARE_KERNEL_FN(unary_backward,
                      (const UnaryFn& fn, const Tensor& saved, const Tensor& grad_out, Tensor& grad_x))

}  // namespace gat::ops
