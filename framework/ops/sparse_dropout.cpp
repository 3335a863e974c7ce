#include "gat/framework/ops/sparse_dropout.h"

#include <algorithm>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/rng_cpu.h"

namespace gat::ops {

namespace cpu_impl {

void sparse_dropout(const CsrMatrix& a, const Tensor& values, const DropoutKey& key, double keep_scale,
                    Tensor& out) {
  GAT_CHECK(!key.stream_base, "sparse_dropout: a key recorded for a CUDA graph reached the CPU");
  dispatch_float(values.dtype(), "sparse_dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* pv = values.data<T>();                    // (nnz,)
    const int32_t* row = a.row_idx().data<int32_t>();  // (nnz,)
    const int32_t* col = a.col_idx().data<int32_t>();  // (nnz,)
    T* po = out.data<T>();                             // (nnz,)
    const uint64_t cols = static_cast<uint64_t>(a.cols());
    const T s = static_cast<T>(keep_scale);
    // Entries in batches: the Philox blocks of their flat indices row * cols + col (as dense
    // dropout), drawn together, then each entry's word of its block.
    constexpr int64_t kBatch = 64;
    const int64_t nnz = out.numel();
    detail::parallel_for(
        (nnz + kBatch - 1) / kBatch,
        [&](int64_t batch) {
          const int64_t first = batch * kBatch, count = std::min(kBatch, nnz - first);
          uint64_t flat[kBatch], blocks[kBatch] = {};  // {}: g++ cannot see count <= kBatch
          uint8_t kept[kBatch];
          for (int64_t k = 0; k < count; ++k) {
            flat[k] = static_cast<uint64_t>(row[first + k]) * cols + static_cast<uint64_t>(col[first + k]);
            blocks[k] = flat[k] >> 2;
          }
          keep4_blocks(key, blocks, count, kept);
          for (int64_t k = 0; k < count; ++k) {
            const T v = pv[first + k];
            // as DropoutKey::apply: a zero stays zero
            po[first + k] = v != T(0) ? DropoutKey::apply_kept(v, (kept[k] >> (flat[k] & 3)) & 1u, s) : T(0);
          }
        },
        kBatch * 8);  // a batched Philox block costs about 8 element steps
  });
}

}  // namespace cpu_impl

namespace kernels {

void sparse_dropout(const CsrMatrix& a, const Tensor& values, const DropoutKey& key, double keep_scale,
                    Tensor& out) {
  if (values.is_cuda()) return GAT_CUDA_CALL(cuda_impl::sparse_dropout(a, values, key, keep_scale, out));
  cpu_impl::sparse_dropout(a, values, key, keep_scale, out);
}

}  // namespace kernels

namespace {

// The masked, rescaled copy of `values` (nnz,) laid out as a's entries: forward of a's values,
// backward of their gradient.
Tensor apply_mask(const CsrMatrix& a, const Tensor& values, const DropoutKey& key) {
  Tensor out = Tensor::empty(values.shape(), values.dtype(), values.device(), "sparse_dropout");  // (nnz,)
  kernels::sparse_dropout(a, values, key, dropout_keep_scale(key), out);
  return out;
}

}  // namespace

CsrMatrix sparse_dropout(const CsrMatrix& a, const DropoutKey& key) {
  GAT_CHECK(a.values().defined(), "sparse_dropout: empty matrix 'a'");
  if (detail::bf16_in_f32("sparse_dropout", a.values()))
    return a.with_values(
        detail::rounded_to_bf16(sparse_dropout(a.with_values(detail::widened(a.values())), key).values()));
  check_float("sparse_dropout", "a.values", a.values());
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "sparse_dropout: drop probability p = ", key.p,
            " is outside [0, 1)");
  if (!key.active()) return a;
  const CsrMatrix pattern = a.with_values(a.values().detach());  // no history kept by the closure
  Tensor values = autograd::record(
      "sparse_dropout", apply_mask(a, a.values(), key), {a.values()},
      [pattern, key](const Tensor& g) { return std::vector<Tensor>{apply_mask(pattern, g, key)}; });
  return a.with_values(values);
}

}  // namespace gat::ops
