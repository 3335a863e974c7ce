#include "gat/framework/ops/detail/activations.cuh"
#include "gat/framework/ops/detail/keep_map.cuh"
#include "gat/framework/ops/detail/on_stored.cuh"
#include "gat/framework/ops/elu_dropout.h"

namespace gat::ops::cuda_impl {

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale, Tensor& out,
                         KeepMask&) {
  detail::dispatch_float_or_bf16(x.dtype(), "elu_dropout", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_keep_map(
        "elu_dropout", x.numel(), key,
        detail::on_stored<T>(detail::EluDropoutForward<M>{static_cast<M>(alpha), static_cast<M>(keep_scale)}),
        out.data<T>(), x.data<T>());
  });
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha, const DropoutKey& key,
                          double keep_scale, const KeepMask&, Tensor& grad_x) {
  detail::dispatch_float_or_bf16(out.dtype(), "elu_dropout backward", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_keep_map("elu_dropout backward", out.numel(), key,
                            detail::on_stored<T>(detail::EluDropoutBackward<M>{
                                static_cast<M>(keep_scale), static_cast<M>(alpha * keep_scale)}),
                            grad_x.data<T>(), out.data<T>(), grad_out.data<T>());
  });
}

}  // namespace gat::ops::cuda_impl
