#include "gat/framework/ops/sparse_matmul.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"
#include "gat/framework/ops/sparse_dropout.h"

namespace gat::ops {

namespace {

// orow (N,) += values[e] * d[index[e], :] for the entries e = kept[0], ..., kept[count - 1], in
// that order. d (*, N). With `prefetch` (several threads) the entries' rows are first asked for
// at once. The row is taken 64 columns at a time (a GAT layer's 8 heads of 8), held in
// vector registers across the entries (a load and a store of the row per entry made a chain
// through memory); the columns past the last whole 64 one by one. The same sums either way.
template <class T>
GAT_SIMD_CLONES void add_scaled_rows(T* orow, const T* d, int64_t N, const T* values, const int32_t* index,
                                     const int64_t* kept, int count, bool prefetch) {
  typedef T Lanes __attribute__((vector_size(64)));
  constexpr int64_t kLanes = 64 / sizeof(T), kVectors = 64 / kLanes;  // 64 columns
  // The entries' rows asked for at once (their first 64 columns): d's rows at random places (the
  // gradient's rows of the transposed product) reach the cache together.
  for (int q = 0; prefetch && q < count; ++q)
    detail::prefetch_row(d + static_cast<int64_t>(index[kept[q]]) * N, std::min<int64_t>(N, 64));
  int64_t j = 0;
  for (; j + 64 <= N; j += 64) {
    Lanes acc[kVectors];
    std::memcpy(acc, orow + j, sizeof acc);
    for (int q = 0; q < count; ++q) {
      const T v = values[kept[q]];
      const T* drow = d + static_cast<int64_t>(index[kept[q]]) * N + j;
      for (int64_t c = 0; c < kVectors; ++c) {
        Lanes x;
        std::memcpy(&x, drow + c * kLanes, sizeof x);
        acc[c] += v * x;
      }
    }
    std::memcpy(orow + j, acc, sizeof acc);
  }
  for (int q = 0; q < count && j < N; ++q) {
    const T v = values[kept[q]];
    const T* drow = d + static_cast<int64_t>(index[kept[q]]) * N;
    for (int64_t c = j; c < N; ++c) orow[c] += v * drow[c];
  }
}

}  // namespace

namespace cpu_impl {

void sparse_rows(const SparseRows& a, const Tensor& dense, Tensor& out) {
  dispatch_float(out.dtype(), "sparse_matmul", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* ptr = a.ptr.data<int32_t>();                           // (R+1,)
    const int32_t* entry = a.entry ? a.entry->data<int32_t>() : nullptr;  // (nnz,)
    const int32_t* index = a.index.data<int32_t>();                       // (nnz,)
    const T* values = a.values.data<T>();                                 // (nnz,)
    const T* d = dense.data<T>();                                         // (*, N)
    T* o = out.data<T>();                                                 // (R, N)
    const int64_t R = out.size(0), N = out.size(1);
    // A^T with the matrix's CPU arrays: its values put in the transpose's order first (read in
    // order, written at their places t_position), then every array is read in order. Reading
    // values[t_entry[p]] at random places, a step's weight gradient spent as long in that walk as
    // in its products.
    std::unique_ptr<T[]> in_order;  // (nnz,) or null
    if (a.entry && a.pieces && a.pieces->t_position().defined()) {
      const int64_t nnz = a.values.numel();
      in_order.reset(new T[static_cast<size_t>(nnz)]);
      const int32_t* position = a.pieces->t_position().data<int32_t>();  // (nnz,)
      T* placed = in_order.get();
      detail::parallel_for(nnz, [=](int64_t e) { placed[position[e]] = values[e]; });
      values = placed;
      index = a.pieces->t_row_idx().data<int32_t>();
      entry = nullptr;
    }
    // a row costs a fill of N and N per entry
    detail::parallel_for_rows(ptr, R, N, N, [&](int64_t r) {
      const bool prefetch = omp_get_num_threads() > 1;  // on one thread every row is in its cache
      T* orow = o + r * N;
      std::fill(orow, orow + N, T(0));
      // Zero values (most of them after dropout, at random places) are skipped by collecting
      // the row's other entries without a branch, up to 64 at a time, then adding those in order.
      constexpr int kBatch = 64;
      int64_t kept[kBatch];
      int count = 0;
      auto add_kept = [&] {
        add_scaled_rows(orow, d, N, values, index, kept, count, prefetch);
        count = 0;
      };
      for (int64_t p = ptr[r]; p < ptr[r + 1]; ++p) {
        const int64_t e = entry ? entry[p] : p;
        kept[count] = e;
        count += values[e] != T(0);
        if (count == kBatch) add_kept();
      }
      add_kept();
    });
  });
}

void sparse_dropout_rows(const CsrMatrix& a, const DropoutKey& key, double keep_scale, const Tensor& dense,
                         Tensor& out, Tensor& dropped) {
  sparse_dropout(a, a.values(), key, keep_scale, dropped);
  sparse_rows({a.row_ptr(), nullptr, a.col_idx(), dropped}, dense, out);
}

void sparse_dots(const CsrMatrix& a, const Tensor& g, const Tensor& b, Tensor& out) {
  dispatch_float(out.dtype(), "sparse_matmul", [&](auto zero) {
    using T = decltype(zero);
    const int32_t* row = a.row_idx().data<int32_t>();  // (nnz,)
    const int32_t* col = a.col_idx().data<int32_t>();  // (nnz,)
    const T* pg = g.data<T>();                         // (M, N)
    const T* pb = b.data<T>();                         // (K, N)
    T* o = out.data<T>();                              // (nnz,)
    const int64_t N = g.size(1);
    detail::parallel_for(
        out.numel(),
        [&](int64_t e) {
          const T* gi = pg + static_cast<int64_t>(row[e]) * N;
          const T* bk = pb + static_cast<int64_t>(col[e]) * N;
          T acc = T(0);
          for (int64_t j = 0; j < N; ++j) acc += gi[j] * bk[j];
          o[e] = acc;
        },
        N);
  });
}

}  // namespace cpu_impl

namespace kernels {

void sparse_rows(const SparseRows& a, const Tensor& dense, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::sparse_rows(a, dense, out));
  cpu_impl::sparse_rows(a, dense, out);
}

void sparse_dropout_rows(const CsrMatrix& a, const DropoutKey& key, double keep_scale, const Tensor& dense,
                         Tensor& out, Tensor& dropped) {
  if (out.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::sparse_dropout_rows(a, key, keep_scale, dense, out, dropped));
  cpu_impl::sparse_dropout_rows(a, key, keep_scale, dense, out, dropped);
}

void sparse_dots(const CsrMatrix& a, const Tensor& g, const Tensor& b, Tensor& out) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::sparse_dots(a, g, b, out));
  cpu_impl::sparse_dots(a, g, b, out);
}

}  // namespace kernels

namespace {

void check_product(const char* op, const CsrMatrix& a, const Tensor& b) {
  GAT_CHECK(a.values().defined(), op, ": empty matrix 'a'");
  check_float(op, "a.values", a.values());
  check_same(op, "a.values", a.values(), "b", b);
  GAT_CHECK(b.dim() == 2 && a.cols() == b.size(0), op, ": cannot multiply a ", a.describe(), " by b ",
            b.describe(), " (expected (M, K) x (K, N))");
}

// The gradients of a b for G = d out (M, N): d a.values() (nnz,) when need_values, d b (K, N)
// when need_b (undefined otherwise).
std::vector<Tensor> product_gradients(const CsrMatrix& a, const Tensor& b, const Tensor& grad_out,
                                      bool need_values, bool need_b) {
  Tensor grad_values, grad_b;
  if (need_values) {  // (nnz,): G[i, :] . b[k, :]
    grad_values = Tensor::empty(a.values().shape(), b.dtype(), b.device(), "sparse_matmul grad_values");
    kernels::sparse_dots(a, grad_out, b, grad_values);
  }
  if (need_b) {  // A^T (K, M) · G (M, N) through the transpose plan
    grad_b = Tensor::empty(b.shape(), b.dtype(), b.device(), "sparse_matmul grad_b");
    kernels::sparse_rows({a.t_row_ptr(), &a.t_entry(), a.row_idx(), a.values(), &a}, grad_out, grad_b);
  }
  return {grad_values, grad_b};
}

}  // namespace

Tensor sparse_matmul(const CsrMatrix& a, const Tensor& b) {
  if (detail::bf16_in_f32("sparse_matmul", a.values(), b))
    return detail::rounded_to_bf16(
        sparse_matmul(a.with_values(detail::widened(a.values())), detail::widened(b)));
  check_product("sparse_matmul", a, b);
  Tensor out = Tensor::empty({a.rows(), b.size(1)}, b.dtype(), b.device(), "sparse_matmul");  // (M, N)
  kernels::sparse_rows({a.row_ptr(), nullptr, a.col_idx(), a.values()}, b, out);
  const Tensor& values = a.values();
  return autograd::record(
      "sparse_matmul", out, {values, b},
      [a = a.with_values(values.detach()), b = b.detach(), need_values = values.requires_grad(),
       need_b = b.requires_grad()](const Tensor& grad_out) {
        return product_gradients(a, b, grad_out, need_values, need_b);
      });
}

Tensor sparse_dropout_matmul(const CsrMatrix& a, const DropoutKey& key, const Tensor& b) {
  if (detail::bf16_in_f32("sparse_dropout_matmul", a.values(), b))
    return detail::rounded_to_bf16(
        sparse_dropout_matmul(a.with_values(detail::widened(a.values())), key, detail::widened(b)));
  check_product("sparse_dropout_matmul", a, b);
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "sparse_dropout_matmul: drop probability p = ", key.p,
            " is outside [0, 1)");
  if (!key.active()) return sparse_matmul(a, b);
  Tensor out =
      Tensor::empty({a.rows(), b.size(1)}, b.dtype(), b.device(), "sparse_dropout_matmul");  // (M, N)
  Tensor dropped =
      Tensor::empty(a.values().shape(), b.dtype(), b.device(), "sparse_dropout_matmul values");  // (nnz,)
  kernels::sparse_dropout_rows(a, key, dropout_keep_scale(key), b, out, dropped);
  const Tensor& values = a.values();
  return autograd::record(
      "sparse_dropout_matmul", out, {values, b},
      [a = a.with_values(dropped), b = b.detach(), key, need_values = values.requires_grad(),
       need_b = b.requires_grad()](const Tensor& grad_out) {
        std::vector<Tensor> grads = product_gradients(a, b, grad_out, need_values, need_b);
        if (need_values) {  // through the dropout: the same mask applied to d dropped
          Tensor grad_values = Tensor::empty(grads[0].shape(), grads[0].dtype(), grads[0].device(),
                                             "sparse_dropout_matmul grad_values");
          kernels::sparse_dropout(a, grads[0], key, dropout_keep_scale(key), grad_values);
          grads[0] = grad_values;
        }
        return grads;
      });
}

}  // namespace gat::ops
