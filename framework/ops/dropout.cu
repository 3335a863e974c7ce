#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct DropoutFn {
  const T* x;  // (n,)
  long long n;
  DropoutKey key;
  T keep_scale;
  T* out;      // (n,)
  __device__ void operator()(long long block) const {  // elements [4 block, 4 block + 4), as the CPU
    const unsigned kept = key.keep4(static_cast<uint64_t>(block));
    for (long long k = 0, i = 4 * block; k < 4 && i < n; ++k, ++i)
      out[i] = DropoutKey::apply_kept(x[i], (kept >> k) & 1u, keep_scale);
  }
};

// out = x * keep * keep_scale, the mask drawn from the key.
void apply_mask(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out) {
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const long long n = x.numel();
    detail::launch_for_each("dropout", (n + 3) / 4,
                            DropoutFn<T>{x.data<T>(), n, key, static_cast<T>(keep_scale), out.data<T>()});
  });
}

}  // namespace

void dropout_forward(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out,
                     KeepMask&) {
  apply_mask(x, key, keep_scale, out);
}

void dropout_backward(const Tensor& grad_out, const DropoutKey& key, double keep_scale,
                      const KeepMask&, Tensor& grad_x) {
  apply_mask(grad_out, key, keep_scale, grad_x);
}

}  // namespace gat::ops::cuda_impl
