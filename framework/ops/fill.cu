#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/fill.h"

namespace gat::ops::cuda_impl {

namespace {
template <class T>
struct Fill {
  T* out;  // (n,)
  T value;
  __device__ void operator()(long long i) const { out[i] = value; }
};
}  // namespace

void fill_(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::f32:
      return detail::launch_for_each("fill_", t.numel(),
                                     Fill<float>{t.data<float>(), static_cast<float>(value)});
    case DType::f64:
      return detail::launch_for_each("fill_", t.numel(), Fill<double>{t.data<double>(), value});
    case DType::i32:
      return detail::launch_for_each("fill_", t.numel(),
                                     Fill<int32_t>{t.data<int32_t>(), static_cast<int32_t>(value)});
    case DType::bf16:
      return detail::launch_for_each("fill_", t.numel(),
                                     Fill<bf16>{t.data<bf16>(), to_bf16(static_cast<float>(value))});
    case DType::i64:
      return detail::launch_for_each("fill_", t.numel(),
                                     Fill<int64_t>{t.data<int64_t>(), static_cast<int64_t>(value)});
  }
}

}  // namespace gat::ops::cuda_impl
