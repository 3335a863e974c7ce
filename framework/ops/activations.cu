#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/detail/activations.cuh"
#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// Each kernel reads elements stored as T, computes in M = opmath_t<T> (f32 for bf16) and rounds
// once where it stores (detail/convert.h).
template <class T, class M = detail::opmath_t<T>>
struct LeakyReluFn {
  const T* x;  // (n,)
  M slope;
  T* out;  // (n,)
  __device__ void operator()(long long i) const {
    const M v = detail::to_opmath(x[i]);
    out[i] = detail::from_opmath<T>(v > M(0) ? v : slope * v);
  }
};

template <class T, class M = detail::opmath_t<T>>
struct LeakyReluBackwardFn {
  const T* x;  // (n,)
  const T* g;  // (n,)
  M slope;
  T* grad_x;  // (n,)
  __device__ void operator()(long long i) const {
    grad_x[i] = detail::from_opmath<T>(detail::to_opmath(x[i]) > M(0) ? detail::to_opmath(g[i])
                                                                      : slope * detail::to_opmath(g[i]));
  }
};

template <class T, class M = detail::opmath_t<T>>
struct EluFn {
  const T* x;  // (n,)
  M alpha;
  T* out;  // (n,)
  __device__ void operator()(long long i) const {
    out[i] = detail::from_opmath<T>(detail::elu_value(detail::to_opmath(x[i]), alpha));
  }
};

template <class T, class M = detail::opmath_t<T>>
struct EluBackwardFn {
  const T* x;  // (n,)
  const T* g;  // (n,)
  M alpha;
  T* grad_x;  // (n,)
  __device__ void operator()(long long i) const {
    const M v = detail::to_opmath(x[i]);
    grad_x[i] =
        detail::from_opmath<T>(v > M(0) ? detail::to_opmath(g[i]) : alpha * exp(v) * detail::to_opmath(g[i]));
  }
};

}  // namespace

void leaky_relu_forward(const Tensor& x, double negative_slope, Tensor& out) {
  detail::dispatch_float_or_bf16(x.dtype(), "leaky_relu", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_for_each("leaky_relu", x.numel(),
                            LeakyReluFn<T>{x.data<T>(), static_cast<M>(negative_slope), out.data<T>()});
  });
}

void leaky_relu_backward(const Tensor& x, const Tensor& grad_out, double negative_slope, Tensor& grad_x) {
  detail::dispatch_float_or_bf16(x.dtype(), "leaky_relu backward", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_for_each("leaky_relu backward", x.numel(),
                            LeakyReluBackwardFn<T>{x.data<T>(), grad_out.data<T>(),
                                                   static_cast<M>(negative_slope), grad_x.data<T>()});
  });
}

void elu_forward(const Tensor& x, double alpha, Tensor& out) {
  detail::dispatch_float_or_bf16(x.dtype(), "elu", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_for_each("elu", x.numel(), EluFn<T>{x.data<T>(), static_cast<M>(alpha), out.data<T>()});
  });
}

void elu_backward(const Tensor& x, const Tensor& grad_out, double alpha, Tensor& grad_x) {
  detail::dispatch_float_or_bf16(x.dtype(), "elu backward", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_for_each(
        "elu backward", x.numel(),
        EluBackwardFn<T>{x.data<T>(), grad_out.data<T>(), static_cast<M>(alpha), grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
