#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/index_rows.h"

namespace gat::ops::cuda_impl {

namespace {

// One thread per Word of an output row: a 32-bit word, or four (uint4, a 16-byte load) where
// every row starts 16-byte aligned. Consecutive threads read consecutive words of a row, a warp
// 512 bytes in 16-byte loads (a row of 128 f32, or parts of neighbouring rows). The wide loads
// matter most where x is host memory read in place over PCIe (the loader's mapped features,
// cuda::HostMapping): each load is one request there.
template <class Word>
struct GatherFn {
  const Word* x;         // (N, W) words
  const int32_t* index;  // (K,)
  long long row_words;   // W
  Word* out;             // (K, W) words
  template <class I>
  __device__ void operator()(I i) const {
    const I k = i / static_cast<I>(row_words), w = i % static_cast<I>(row_words);
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
  const int32_t* rows = index.index().data<int32_t>();
  if (row_words % 4 == 0 && detail::all_aligned(sizeof(uint4), {x.raw_data(), out.raw_data()})) {
    const int64_t row_vecs = row_words / 4;
    detail::launch_for_each("index_rows", index.size() * row_vecs,
                            GatherFn<uint4>{static_cast<const uint4*>(x.raw_data()), rows, row_vecs,
                                            static_cast<uint4*>(out.raw_data())});
    return;
  }
  detail::launch_for_each("index_rows", index.size() * row_words,
                          GatherFn<uint32_t>{static_cast<const uint32_t*>(x.raw_data()), rows, row_words,
                                             static_cast<uint32_t*>(out.raw_data())});
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
