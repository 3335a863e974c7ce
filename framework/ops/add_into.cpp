#include "gat/framework/ops/add_into.h"

#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

void add_into(Tensor& dst, const Tensor& src) {
  check_same("add_into", "dst", dst, "src", src);
  check_shape("add_into", "src", src, dst.shape());
  if (dst.is_cuda()) return GAT_CUDA_CALL(cuda_impl::add_into(dst, src));
  dispatch_float(dst.dtype(), "add_into", [&](auto zero) {
    using T = decltype(zero);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    const int64_t n = dst.numel();
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

}  // namespace gat::ops
