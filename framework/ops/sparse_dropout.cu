#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/sparse_dropout.h"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct SparseDropoutFn {
  const T* values;     // (nnz,)
  const int32_t* row;  // (nnz,) row of each entry
  const int32_t* col;  // (nnz,) column of each entry
  unsigned long long cols;
  DropoutKey key;
  T keep_scale;
  T* out;  // (nnz,)
  __device__ void operator()(long long e) const {
    const uint64_t flat = static_cast<uint64_t>(row[e]) * cols + static_cast<uint64_t>(col[e]);
    out[e] = key.apply(values[e], flat, keep_scale);  // as the CPU
  }
};

}  // namespace

void sparse_dropout(const CsrMatrix& a, const Tensor& values, const DropoutKey& key, double keep_scale,
                    Tensor& out) {
  dispatch_float(values.dtype(), "sparse_dropout", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "sparse_dropout", values.numel(),
        SparseDropoutFn<T>{values.data<T>(), a.row_idx().data<int32_t>(), a.col_idx().data<int32_t>(),
                           static_cast<unsigned long long>(a.cols()), key, static_cast<T>(keep_scale),
                           out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
