// Kernels of the dropout ops over elements stored as bf16 (included by framework/ops/*.cu only).
#pragma once

#include <type_traits>

#include "gat/framework/ops/detail/convert.h"

namespace gat::ops::detail {

// A functor of detail/keep_map.cuh, fn(x, keep) or fn(x, y, keep), that computes in opmath_t<T>,
// applied to elements stored as T: they are widened as read and the result is rounded once as
// stored. For f32 and f64 on_stored gives fn itself, so their kernels are unchanged.
template <class T, class Fn>
struct OnStored {
  Fn fn;
  __device__ __forceinline__ T operator()(T x, unsigned keep) const {
    return from_opmath<T>(fn(to_opmath(x), keep));
  }
  __device__ __forceinline__ T operator()(T x, T y, unsigned keep) const {
    return from_opmath<T>(fn(to_opmath(x), to_opmath(y), keep));
  }
};
template <class T, class Fn>
auto on_stored(const Fn& fn) {
  if constexpr (std::is_same_v<T, opmath_t<T>>)
    return fn;
  else
    return OnStored<T, Fn>{fn};
}

}  // namespace gat::ops::detail
