#include "gat/framework/ops/add_into.h"

#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

void add_into(Tensor& dst, const Tensor& src) {
  if (dst.dtype() == DType::bf16) {  // the sum in f32, rounded once
    bf16* d = dst.data<bf16>();
    const bf16* s = src.data<bf16>();
    detail::parallel_for(dst.numel(), [=](int64_t i) { d[i] = to_bf16(to_f32(d[i]) + to_f32(s[i])); });
    return;
  }
  dispatch_float(dst.dtype(), "add_into", [&](auto zero) {
    using T = decltype(zero);
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    const int64_t n = dst.numel();
#pragma omp parallel for if (n > detail::kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

}  // namespace cpu_impl

namespace kernels {

void add_into(Tensor& dst, const Tensor& src) {
  if (dst.is_cuda()) return GAT_CUDA_CALL(cuda_impl::add_into(dst, src));
  cpu_impl::add_into(dst, src);
}

}  // namespace kernels

void add_into(Tensor& dst, const Tensor& src) {
  check_same("add_into", "dst", dst, "src", src);
  check_shape("add_into", "src", src, dst.shape());
  kernels::add_into(dst, src);
  dst.mark_modified();
}

}  // namespace gat::ops
