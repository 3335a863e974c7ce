#include "gat/framework/ops/activations.cuh"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/keep_map.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct EluDropoutForward {
  T alpha;
  T keep_scale;
  __device__ __forceinline__ T operator()(T x, unsigned keep) const {
    return DropoutKey::apply_kept(detail::elu_value(x, alpha), keep, keep_scale);
  }
};

// From the forward's output o and the gradient g.
template <class T>
struct EluDropoutBackward {
  T keep_scale;
  T alpha_scale;  // alpha * keep_scale
  __device__ __forceinline__ T operator()(T o, T g, unsigned keep) const {
    return DropoutKey::apply_kept(g, keep, o > T(0) ? keep_scale : o + alpha_scale);
  }
};

}  // namespace

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale,
                         Tensor& out, KeepMask&) {
  dispatch_float(x.dtype(), "elu_dropout", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_keep_map("elu_dropout", x.numel(), key,
                            EluDropoutForward<T>{static_cast<T>(alpha), static_cast<T>(keep_scale)},
                            out.data<T>(), x.data<T>());
  });
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha,
                          const DropoutKey& key, double keep_scale, const KeepMask&,
                          Tensor& grad_x) {
  dispatch_float(out.dtype(), "elu_dropout backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_keep_map("elu_dropout backward", out.numel(), key,
                            EluDropoutBackward<T>{static_cast<T>(keep_scale), static_cast<T>(alpha * keep_scale)},
                            grad_x.data<T>(), out.data<T>(), grad_out.data<T>());
  });
}

}  // namespace gat::ops::cuda_impl
