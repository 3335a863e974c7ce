// The activations' formulas (activations.h, elu_dropout.h) as device functions, shared by the
// kernels of activations.cu, elu_dropout.cu and the GAT aggregate's output activation
// (detail/csr_softmax_aggregate_kernels.cuh; included by CUDA sources only).
#pragma once

#include "gat/framework/rng.h"

namespace gat::ops::detail {

// ELU: x for x > 0, alpha (exp(x) - 1) otherwise. expm1 is computed for every x and the result
// selected: under a branch, a warp whose lanes differ in sign ran both ways (26 of 32 lanes
// active in ELU + dropout over 5M x 64 values). The same values, NaN included.
template <class T>
__device__ __forceinline__ T elu_value(T x, T alpha) {
  const T negative = alpha * expm1(x);
  return x > T(0) ? x : negative;
}

// elu_dropout (elu_dropout.h) of one element x whose dropout decision is keep (0 or 1).
template <class T>
struct EluDropoutForward {
  T alpha;
  T keep_scale;
  __device__ __forceinline__ T operator()(T x, unsigned keep) const {
    return DropoutKey::apply_kept(elu_value(x, alpha), keep, keep_scale);
  }
};

// elu_dropout's gradient from the forward's output o and its gradient g.
template <class T>
struct EluDropoutBackward {
  T keep_scale;
  T alpha_scale;  // alpha * keep_scale
  __device__ __forceinline__ T operator()(T o, T g, unsigned keep) const {
    return DropoutKey::apply_kept(g, keep, o > T(0) ? keep_scale : o + alpha_scale);
  }
};

// The input x of a kept elu_dropout output o = elu(x, alpha) keep_scale: y = o / keep_scale, x = y
// for y >= 0 and log1p(y / alpha) otherwise, floored at log(epsilon) where y / alpha rounds to
// -1 (the gradient there, o + alpha keep_scale, is 0 or a rounding error; a product with it must
// stay finite). For x < 0 the error of y makes x's grow as exp(-x), but the gradient shrinks as
// exp(x): their product keeps to a few ulp of alpha keep_scale g, as the gradient itself
// (elu_dropout.h). alpha = 0 leaves no negative y (its ELU is 0 or -0 there). In f32 the log is
// the hardware's of 1 + y / alpha (__logf: absolute error 2^-21.4 on [0.5, 2], 3 ulp below):
// log1pf's relative accuracy near x = 0 buys nothing on a product with G whose error there is
// already about eps g, and it costs tens of instructions where __logf costs two.
template <class T>
__device__ __forceinline__ T elu_input_of_output(T o, T inverse_keep_scale, T inverse_alpha) {
  const T y = o * inverse_keep_scale;
  if (!(y < T(0))) return y;
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "f32 or f64");
  const T floor = sizeof(T) == 4 ? T(-15.942385152878742) : T(-36.04365338911715);  // log(epsilon)
  T x;
  if constexpr (sizeof(T) == 4)
    x = __logf(1.0f + y * inverse_alpha);  // see below
  else
    x = log1p(y * inverse_alpha);
  return x > floor ? x : floor;
}

}  // namespace gat::ops::detail
