#include "gat/framework/ops/detail/activations.cuh"
#include "gat/framework/ops/detail/keep_map.cuh"
#include "gat/framework/ops/elu_dropout.h"

namespace gat::ops::cuda_impl {

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale, Tensor& out,
                         KeepMask&) {
  dispatch_float(x.dtype(), "elu_dropout", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_keep_map("elu_dropout", x.numel(), key,
                            detail::EluDropoutForward<T>{static_cast<T>(alpha), static_cast<T>(keep_scale)},
                            out.data<T>(), x.data<T>());
  });
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha, const DropoutKey& key,
                          double keep_scale, const KeepMask&, Tensor& grad_x) {
  dispatch_float(out.dtype(), "elu_dropout backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_keep_map(
        "elu_dropout backward", out.numel(), key,
        detail::EluDropoutBackward<T>{static_cast<T>(keep_scale), static_cast<T>(alpha * keep_scale)},
        grad_x.data<T>(), out.data<T>(), grad_out.data<T>());
  });
}

}  // namespace gat::ops::cuda_impl
