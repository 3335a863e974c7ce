#include "gat/framework/ops/detail/keep_map.cuh"
#include "gat/framework/ops/dropout.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct DropoutFn {
  T keep_scale;
  __device__ __forceinline__ T operator()(T x, unsigned keep) const {
    return DropoutKey::apply_kept(x, keep, keep_scale);
  }
};

// out = x * keep * keep_scale, the mask drawn from the key.
void apply_mask(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out) {
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_keep_map("dropout", x.numel(), key, DropoutFn<T>{static_cast<T>(keep_scale)},
                            out.data<T>(), x.data<T>());
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
