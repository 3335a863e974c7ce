#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/to_dtype.h"

namespace gat::ops::cuda_impl {

namespace {
template <class D, class S>
struct Convert {
  const S* in;  // (n,)
  D* out;       // (n,)
  __device__ void operator()(long long i) const { out[i] = detail::convert_value<D>(in[i]); }
};
}  // namespace

void to_dtype(const Tensor& x, Tensor& out) {
  dispatch_dtype(out.dtype(), [&](auto d) {
    dispatch_dtype(x.dtype(), [&](auto s) {
      using D = decltype(d);
      using S = decltype(s);
      detail::launch_for_each("to_dtype", x.numel(), Convert<D, S>{x.data<S>(), out.data<D>()});
    });
  });
}

}  // namespace gat::ops::cuda_impl
