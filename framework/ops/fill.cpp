#include "gat/framework/ops/fill.h"

#include <algorithm>

#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

void fill_(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::f32:
      std::fill_n(t.data<float>(), t.numel(), static_cast<float>(value));
      break;
    case DType::f64:
      std::fill_n(t.data<double>(), t.numel(), value);
      break;
    case DType::i32:
      std::fill_n(t.data<int32_t>(), t.numel(), static_cast<int32_t>(value));
      break;
    case DType::bf16:
      std::fill_n(t.data<bf16>(), t.numel(), to_bf16(static_cast<float>(value)));
      break;
    case DType::i64:
      std::fill_n(t.data<int64_t>(), t.numel(), static_cast<int64_t>(value));
      break;
  }
}

}  // namespace cpu_impl

namespace kernels {

void fill_(Tensor& t, double value) {
  if (t.is_cuda()) return GAT_CUDA_CALL(cuda_impl::fill_(t, value));
  cpu_impl::fill_(t, value);
}

}  // namespace kernels

void fill_(Tensor& t, double value) {
  check_defined("fill_", "t", t);
  kernels::fill_(t, value);
  t.mark_modified();
}

}  // namespace gat::ops
