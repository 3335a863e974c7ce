#include "gat/framework/ops/detail/keep_map.cuh"
#include "gat/framework/ops/detail/on_stored.cuh"
#include "gat/framework/ops/dropout.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T>  // the arithmetic type (detail::on_stored reads and stores bf16)
struct DropoutFn {
  T keep_scale;
  __device__ __forceinline__ T operator()(T x, unsigned keep) const {
    return DropoutKey::apply_kept(x, keep, keep_scale);
  }
};

// out = x * keep * keep_scale, the mask drawn from the key.
void apply_mask(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out) {
  detail::dispatch_float_or_bf16(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    using M = detail::opmath_t<T>;
    detail::launch_keep_map("dropout", x.numel(), key,
                            detail::on_stored<T>(DropoutFn<M>{static_cast<M>(keep_scale)}), out.data<T>(),
                            x.data<T>());
  });
}

}  // namespace

void dropout_forward(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out, KeepMask&) {
  apply_mask(x, key, keep_scale, out);
}

void dropout_backward(const Tensor& grad_out, const DropoutKey& key, double keep_scale, const KeepMask&,
                      Tensor& grad_x) {
  apply_mask(grad_out, key, keep_scale, grad_x);
}

}  // namespace gat::ops::cuda_impl
