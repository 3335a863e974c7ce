// The activations' formulas (activations.h) as device functions, shared by the kernels of
// activations.cu and elu_dropout.cu (included by framework/ops/*.cu only).
#pragma once

namespace gat::ops::detail {

// ELU: x for x > 0, alpha (exp(x) - 1) otherwise.
template <class T>
__device__ __forceinline__ T elu_value(T x, T alpha) {
  return x > T(0) ? x : alpha * expm1(x);
}

}  // namespace gat::ops::detail
