#include "gat/framework/ops/to_dtype.h"

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

bool is_floating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16; }

Tensor converted(const Tensor& x, DType dtype, const char* what) {
  Tensor out = Tensor::empty(x.shape(), dtype, x.device(), what);
  kernels::to_dtype(x, out);
  return out;
}

}  // namespace

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined("to_dtype", "x", x);
  GAT_CHECK(is_floating(x.dtype()), "to_dtype: 'x' must be f32, f64 or bf16, got ", x.describe());
  GAT_CHECK(is_floating(dtype), "to_dtype: the target dtype ", dtype_name(dtype), " is not f32, f64 or bf16");
  if (x.dtype() == dtype) return x;
  const DType from = x.dtype();
  return autograd::record("to_dtype", converted(x, dtype, "to_dtype"), {x}, [from](const Tensor& g) {
    return std::vector<Tensor>{converted(g, from, "to_dtype backward")};
  });
}

namespace kernels {
void to_dtype(const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::to_dtype(x, out));
  cpu_impl::to_dtype(x, out);
}
}  // namespace kernels

namespace cpu_impl {
void to_dtype(const Tensor& x, Tensor& out) {
  dispatch_dtype(out.dtype(), [&](auto d) {
    dispatch_dtype(x.dtype(), [&](auto s) {
      using D = decltype(d);
      using S = decltype(s);
      const S* in = x.data<S>();  // (n,)
      D* o = out.data<D>();       // (n,)
      detail::parallel_for(x.numel(), [=](int64_t i) { o[i] = detail::convert_value<D>(in[i]); });
    });
  });
}
}  // namespace cpu_impl

}  // namespace gat::ops
