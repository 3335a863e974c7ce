#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/losses.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct TermsFn {
  const T* x;  // (n,)
  const T* y;  // (n,)
  T* terms;    // (n,)
  bool mse;
  __device__ void operator()(long long i) const {
    const T xv = x[i], yv = y[i];
    terms[i] = mse ? (xv - yv) * (xv - yv) : ::fmax(xv, T(0)) - xv * yv + ::log1p(::exp(-::fabs(xv)));
  }
};

template <class T>
struct TermsBackwardFn {
  const T* x;  // (n,)
  const T* y;  // (n,)
  const T* g;  // (n,)
  T* dx;       // (n,) or null
  T* dy;       // (n,) or null
  bool mse;
  __device__ void operator()(long long i) const {
    const T d = mse ? T(2) * (x[i] - y[i]) : T(1) / (T(1) + ::exp(-x[i])) - y[i];
    if (dx) dx[i] = d * g[i];
    if (dy) dy[i] = (mse ? -d : -x[i]) * g[i];
  }
};

}  // namespace

void loss_terms_forward(PointwiseLoss loss, const Tensor& x, const Tensor& y, Tensor& terms) {
  dispatch_float(x.dtype(), "loss terms", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "loss terms", x.numel(),
        TermsFn<T>{x.data<T>(), y.data<T>(), terms.data<T>(), loss == PointwiseLoss::mse});
  });
}

void loss_terms_backward(PointwiseLoss loss, const Tensor& x, const Tensor& y, const Tensor& grad_terms,
                         Tensor* grad_x, Tensor* grad_y) {
  dispatch_float(x.dtype(), "loss terms backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "loss terms backward", x.numel(),
        TermsBackwardFn<T>{x.data<T>(), y.data<T>(), grad_terms.data<T>(),
                           grad_x ? grad_x->data<T>() : nullptr, grad_y ? grad_y->data<T>() : nullptr,
                           loss == PointwiseLoss::mse});
  });
}

}  // namespace gat::ops::cuda_impl
