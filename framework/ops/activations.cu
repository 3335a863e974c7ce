#include "gat/framework/ops/activations.h"
#include "gat/framework/ops/detail/activations.cuh"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct LeakyReluFn {
  const T* x;  // (n,)
  T slope;
  T* out;  // (n,)
  __device__ void operator()(long long i) const { out[i] = x[i] > T(0) ? x[i] : slope * x[i]; }
};

template <class T>
struct LeakyReluBackwardFn {
  const T* x;  // (n,)
  const T* g;  // (n,)
  T slope;
  T* grad_x;  // (n,)
  __device__ void operator()(long long i) const { grad_x[i] = x[i] > T(0) ? g[i] : slope * g[i]; }
};

template <class T>
struct EluFn {
  const T* x;  // (n,)
  T alpha;
  T* out;  // (n,)
  __device__ void operator()(long long i) const { out[i] = detail::elu_value(x[i], alpha); }
};

template <class T>
struct EluBackwardFn {
  const T* x;  // (n,)
  const T* g;  // (n,)
  T alpha;
  T* grad_x;  // (n,)
  __device__ void operator()(long long i) const { grad_x[i] = x[i] > T(0) ? g[i] : alpha * exp(x[i]) * g[i]; }
};

}  // namespace

void leaky_relu_forward(const Tensor& x, double negative_slope, Tensor& out) {
  dispatch_float(x.dtype(), "leaky_relu", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("leaky_relu", x.numel(),
                            LeakyReluFn<T>{x.data<T>(), static_cast<T>(negative_slope), out.data<T>()});
  });
}

void leaky_relu_backward(const Tensor& x, const Tensor& grad_out, double negative_slope, Tensor& grad_x) {
  dispatch_float(x.dtype(), "leaky_relu backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("leaky_relu backward", x.numel(),
                            LeakyReluBackwardFn<T>{x.data<T>(), grad_out.data<T>(),
                                                   static_cast<T>(negative_slope), grad_x.data<T>()});
  });
}

void elu_forward(const Tensor& x, double alpha, Tensor& out) {
  dispatch_float(x.dtype(), "elu", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("elu", x.numel(), EluFn<T>{x.data<T>(), static_cast<T>(alpha), out.data<T>()});
  });
}

void elu_backward(const Tensor& x, const Tensor& grad_out, double alpha, Tensor& grad_x) {
  dispatch_float(x.dtype(), "elu backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "elu backward", x.numel(),
        EluBackwardFn<T>{x.data<T>(), grad_out.data<T>(), static_cast<T>(alpha), grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
