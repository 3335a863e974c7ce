#include "framework/ops/dropout.h"
#include "framework/ops/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct DropoutFn {
  const T* x;  // (n,)
  DropoutKey key;
  T keep_scale;
  T* out;      // (n,)
  __device__ void operator()(long long i) const {
    out[i] = key.apply(x[i], static_cast<uint64_t>(i), keep_scale);  // as the CPU
  }
};

}  // namespace

void dropout(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out) {
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("dropout", x.numel(),
                            DropoutFn<T>{x.data<T>(), key, static_cast<T>(keep_scale), out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
