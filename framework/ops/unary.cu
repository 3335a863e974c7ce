#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/unary_functions.h"
#include "gat/framework/ops/unary.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T, UnaryOp kOp>
struct UnaryForwardFn {
  const T* x;  // (n,)
  T* out;      // (n,)
  detail::UnaryParams<T> params;
  __device__ void operator()(long long i) const { out[i] = detail::unary_value<kOp>(x[i], params); }
};

// `saved` is the forward's out or x (unary_backward_reads_output).
template <class T, UnaryOp kOp>
struct UnaryBackwardFn {
  const T* saved;     // (n,)
  const T* grad_out;  // (n,)
  T* grad_x;          // (n,)
  detail::UnaryParams<T> params;
  __device__ void operator()(long long i) const {
    grad_x[i] = detail::unary_gradient<kOp>(saved[i], grad_out[i], params);
  }
};

}  // namespace

void unary_forward(const UnaryFn& fn, const Tensor& x, Tensor& out) {
  dispatch_float(x.dtype(), "unary", [&](auto zero) {
    using T = decltype(zero);
    detail::with_unary_op(fn.op, [&](auto op) {
      detail::launch_for_each(
          "unary", x.numel(),
          UnaryForwardFn<T, decltype(op)::value>{x.data<T>(), out.data<T>(), detail::UnaryParams<T>(fn)});
    });
  });
}

void unary_backward(const UnaryFn& fn, const Tensor& saved, const Tensor& grad_out, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "unary backward", [&](auto zero) {
    using T = decltype(zero);
    detail::with_unary_op(fn.op, [&](auto op) {
      detail::launch_for_each(
          "unary backward", grad_x.numel(),
          UnaryBackwardFn<T, decltype(op)::value>{saved.data<T>(), grad_out.data<T>(), grad_x.data<T>(),
                                                  detail::UnaryParams<T>(fn)});
    });
  });
}

}  // namespace gat::ops::cuda_impl
