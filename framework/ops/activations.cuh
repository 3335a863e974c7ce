// The activations' formulas (activations.h) as device functions, shared by the kernels of
// activations.cu and elu_dropout.cu (included by framework/ops/*.cu only).
#pragma once

namespace gat::ops::detail {

// ELU: x for x > 0, alpha (exp(x) - 1) otherwise. expm1 is computed for every x and the result
// selected: under a branch, a warp whose lanes differ in sign ran both ways (26 of 32 lanes
// active in ELU + dropout over 5M x 64 values). The same values, NaN included.
template <class T>
__device__ __forceinline__ T elu_value(T x, T alpha) {
  const T negative = alpha * expm1(x);
  return x > T(0) ? x : negative;
}

}  // namespace gat::ops::detail
