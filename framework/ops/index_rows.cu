#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/index_rows.h"

namespace gat::ops::cuda_impl {

namespace {

struct GatherFn {
  const uint32_t* x;     // (N, W) words
  const int32_t* index;  // (K,)
  long long row_words;   // W
  uint32_t* out;         // (K, W) words
  __device__ void operator()(long long i) const {
    const long long k = i / row_words, w = i % row_words;
    out[i] = x[static_cast<long long>(index[k]) * row_words + w];
  }
};

// One thread per (distinct row u, feature d): adds its run of g rows in ascending order.
template <class T>
struct ScatterFn {
  const T* g;              // (K, D)
  const int32_t* order;    // (K,)
  const int32_t* rows;     // (U,)
  const int32_t* run_ptr;  // (U+1,)
  long long features;      // D
  T* grad_x;               // (N, D), zeroed by the caller: rows no index points to stay zero
  __device__ void operator()(long long i) const {
    const long long u = i / features, d = i % features;
    T acc = T(0);
    for (int32_t j = run_ptr[u]; j < run_ptr[u + 1]; ++j)
      acc += g[static_cast<long long>(order[j]) * features + d];
    grad_x[static_cast<long long>(rows[u]) * features + d] = acc;
  }
};

}  // namespace

void gather_rows(const Tensor& x, const RowIndex& index, int64_t row_words, Tensor& out) {
  if (row_words == 0) return;
  detail::launch_for_each("index_rows", index.size() * row_words,
                          GatherFn{static_cast<const uint32_t*>(x.raw_data()), index.index().data<int32_t>(),
                                   row_words, static_cast<uint32_t*>(out.raw_data())});
}

void scatter_rows(const Tensor& grad_out, const RowIndex& index, int64_t features, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "index_rows backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "index_rows backward", index.rows().numel() * features,
        ScatterFn<T>{grad_out.data<T>(), index.order().data<int32_t>(), index.rows().data<int32_t>(),
                     index.run_ptr().data<int32_t>(), features, grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
