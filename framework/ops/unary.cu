#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/unary.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T, UnaryOp kOp>
struct UnaryFn {
  const T* x;  // (n,)
  T* out;      // (n,)
  __device__ void operator()(long long i) const {
    const T v = x[i];
    if constexpr (kOp == UnaryOp::exp) out[i] = ::exp(v);
    if constexpr (kOp == UnaryOp::log) out[i] = ::log(v);
    if constexpr (kOp == UnaryOp::sigmoid) out[i] = T(1) / (T(1) + ::exp(-v));
    if constexpr (kOp == UnaryOp::tanh) out[i] = ::tanh(v);
  }
};

// `saved` is x for log, out for the others.
template <class T, UnaryOp kOp>
struct UnaryBackwardFn {
  const T* saved;     // (n,)
  const T* grad_out;  // (n,)
  T* grad_x;          // (n,)
  __device__ void operator()(long long i) const {
    const T s = saved[i], g = grad_out[i];
    if constexpr (kOp == UnaryOp::exp) grad_x[i] = g * s;
    if constexpr (kOp == UnaryOp::log) grad_x[i] = g / s;
    if constexpr (kOp == UnaryOp::sigmoid) grad_x[i] = g * s * (T(1) - s);
    if constexpr (kOp == UnaryOp::tanh) grad_x[i] = g * (T(1) - s * s);
  }
};

template <class T, UnaryOp kOp>
void launch_forward(const char* name, const Tensor& x, Tensor& out) {
  detail::launch_for_each(name, x.numel(), UnaryFn<T, kOp>{x.data<T>(), out.data<T>()});
}

template <class T, UnaryOp kOp>
void launch_backward(const char* name, const Tensor& saved, const Tensor& grad_out, Tensor& grad_x) {
  detail::launch_for_each(name, grad_x.numel(),
                          UnaryBackwardFn<T, kOp>{saved.data<T>(), grad_out.data<T>(), grad_x.data<T>()});
}

}  // namespace

void unary_forward(UnaryOp op, const Tensor& x, Tensor& out) {
  dispatch_float(x.dtype(), "unary", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case UnaryOp::exp:
        return launch_forward<T, UnaryOp::exp>("exp", x, out);
      case UnaryOp::log:
        return launch_forward<T, UnaryOp::log>("log", x, out);
      case UnaryOp::sigmoid:
        return launch_forward<T, UnaryOp::sigmoid>("sigmoid", x, out);
      case UnaryOp::tanh:
        return launch_forward<T, UnaryOp::tanh>("tanh", x, out);
    }
  });
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& out, const Tensor& grad_out, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "unary backward", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case UnaryOp::exp:
        return launch_backward<T, UnaryOp::exp>("exp backward", out, grad_out, grad_x);
      case UnaryOp::log:
        return launch_backward<T, UnaryOp::log>("log backward", x, grad_out, grad_x);
      case UnaryOp::sigmoid:
        return launch_backward<T, UnaryOp::sigmoid>("sigmoid backward", out, grad_out, grad_x);
      case UnaryOp::tanh:
        return launch_backward<T, UnaryOp::tanh>("tanh backward", out, grad_out, grad_x);
    }
  });
}

}  // namespace gat::ops::cuda_impl
