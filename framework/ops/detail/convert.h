// One element converted between the dtypes' C++ types (float, double, int32_t, bf16), on the host
// and on the device: ops::to_dtype's kernels and Tensor::to(DType). And the arithmetic type of a
// stored type (opmath_t), with which a kernel reads bf16 and computes in f32.
#pragma once

#include <type_traits>
#include <utility>

#include "gat/framework/bfloat16.h"
#include "gat/framework/rng.h"  // GAT_HOST_DEVICE
#include "gat/framework/tensor.h"

namespace gat::ops::detail {

// s as a D: from bf16 exactly through f32; to bf16 through f32, rounded to nearest even (as
// PyTorch converts f64 and i32); otherwise static_cast (to i32: truncated toward zero).
template <class D, class S>
GAT_HOST_DEVICE D convert_value(S s) {
  if constexpr (std::is_same_v<S, bf16>)
    return convert_value<D>(to_f32(s));
  else if constexpr (std::is_same_v<D, bf16>)
    return to_bf16(static_cast<float>(s));
  else
    return static_cast<D>(s);
}

// The type a kernel computes in for elements stored as T, as PyTorch's opmath_t
// (ATen/OpMathType.h): f32 for bf16, which is only stored; T itself for f32 and f64, whose kernels
// are thus the same code as before bf16. A kernel templated on the stored T reads with
// to_opmath, computes in opmath_t<T> and rounds once where it stores, with from_opmath.
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<bf16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

template <class T>
GAT_HOST_DEVICE opmath_t<T> to_opmath(T x) {
  return convert_value<opmath_t<T>>(x);
}
template <class T>
GAT_HOST_DEVICE T from_opmath(opmath_t<T> x) {
  return convert_value<T>(x);
}

// dispatch_float (tensor.h) with bf16 too: f(T{}) with T the stored type of an op whose kernels
// read bf16 themselves (float, double or bf16); other dtypes throw naming `op`.
template <class F>
decltype(auto) dispatch_float_or_bf16(DType dtype, const char* op, F&& f) {
  if (dtype == DType::bf16) return f(bf16{});
  return dispatch_float(dtype, op, std::forward<F>(f));
}

}  // namespace gat::ops::detail
