#include "gat/framework/ops/index_rows.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

RowIndex::RowIndex(const Tensor& index, Device device, const char* op) {
  check_dtype(op, "index", index, DType::i32);
  check_dim(op, "index", index, 1);
  const std::vector<int32_t> values = index.to_vector<int32_t>();  // (K,)
  const int32_t count = static_cast<int32_t>(values.size());
  GAT_CHECK(static_cast<int64_t>(count) == index.numel(), op, ": ", index.numel(),
            " indices exceed the i32 range");
  for (int32_t k = 0; k < count; ++k) {
    GAT_CHECK(values[k] >= 0, op, ": index ", values[k], " at position ", k, " is negative");
    if (values[k] > max_index_) {
      max_index_ = values[k];
      max_position_ = k;
    }
  }
  std::vector<int32_t> order(values.size());  // (K,)
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t p, int32_t q) { return values[p] < values[q]; });
  std::vector<int32_t> rows, run_ptr{0};  // (U,), (U+1,)
  for (int32_t j = 0; j < count; ++j) {
    if (j > 0 && values[order[j]] == values[order[j - 1]]) continue;
    if (j > 0) run_ptr.push_back(j);
    rows.push_back(values[order[j]]);
  }
  if (count > 0) run_ptr.push_back(count);
  const int64_t distinct = static_cast<int64_t>(rows.size());
  index_ = Tensor::from_vector(values, {count}, device);
  order_ = Tensor::from_vector(order, {count}, device);
  rows_ = Tensor::from_vector(rows, {distinct}, device);
  run_ptr_ = Tensor::from_vector(run_ptr, {distinct + 1}, device);
}

namespace cpu_impl {

void gather_rows(const Tensor& x, const RowIndex& index, int64_t row_words, Tensor& out) {
  const size_t row_bytes = static_cast<size_t>(row_words) * 4;
  const int32_t* idx = index.index().data<int32_t>();        // (K,)
  const char* src = static_cast<const char*>(x.raw_data());  // (N, row_bytes)
  char* dst = static_cast<char*>(out.raw_data());            // (K, row_bytes)
  detail::parallel_for(
      index.size(),
      [&](int64_t k) {
        std::memcpy(dst + k * row_bytes, src + static_cast<size_t>(idx[k]) * row_bytes, row_bytes);
      },
      static_cast<int64_t>(row_bytes / sizeof(double)));
}

void scatter_rows(const Tensor& grad_out, const RowIndex& index, int64_t features, Tensor& grad_x) {
  const int64_t row_elems = features;  // D
  dispatch_float(grad_out.dtype(), "index_rows backward", [&](auto zero) {
    using T = decltype(zero);
    const T* pg = grad_out.data<T>();                      // (K, D)
    T* pdx = grad_x.data<T>();                             // (N, D)
    const int32_t* order = index.order().data<int32_t>();  // (K,)
    const int32_t* rows = index.rows().data<int32_t>();    // (U,)
    const int32_t* run = index.run_ptr().data<int32_t>();  // (U+1,)
    const int64_t distinct = index.rows().numel();
    const int64_t cost = distinct > 0 ? row_elems * index.size() / distinct : 0;  // per distinct row
    detail::parallel_for(
        distinct,
        [&](int64_t u) {
          T* dst = pdx + static_cast<int64_t>(rows[u]) * row_elems;
          for (int32_t j = run[u]; j < run[u + 1]; ++j) {
            const T* src = pg + static_cast<int64_t>(order[j]) * row_elems;
            for (int64_t d = 0; d < row_elems; ++d) dst[d] += src[d];
          }
        },
        cost);
  });
}

}  // namespace cpu_impl

namespace kernels {

void gather_rows(const Tensor& x, const RowIndex& index, int64_t row_words, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::gather_rows(x, index, row_words, out));
  cpu_impl::gather_rows(x, index, row_words, out);
}

void scatter_rows(const Tensor& grad_out, const RowIndex& index, int64_t features, Tensor& grad_x) {
  if (grad_out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::scatter_rows(grad_out, index, features, grad_x));
  cpu_impl::scatter_rows(grad_out, index, features, grad_x);
}

}  // namespace kernels

Tensor index_rows(const Tensor& x, const RowIndex& index) {
  check_defined("index_rows", "x", x);
  GAT_CHECK(x.dim() >= 1, "index_rows: 'x' must have at least one dimension, got ", x.describe());
  GAT_CHECK(index.index().defined(), "index_rows: the RowIndex is empty (default-constructed)");
  GAT_CHECK(index.device() == x.device(), "index_rows: the index is on ", device_name(index.device()),
            " but 'x' ", x.describe(), " is not");
  GAT_CHECK(index.max_index() < x.size(0), "index_rows: index ", index.max_index(), " at position ",
            index.max_position(), " is out of range for 'x' ", x.describe(), " (", x.size(0), " rows)");
  const int64_t count = index.size();
  const int64_t row_elems = shape_numel(Shape(x.shape().begin() + 1, x.shape().end()));  // D
  Shape out_shape = x.shape();
  out_shape[0] = count;

  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), "index_rows");
  const int64_t row_words = row_elems * static_cast<int64_t>(dtype_size(x.dtype())) / 4;
  kernels::gather_rows(x, index, row_words, out);

  const Shape& in_shape = x.shape();
  return autograd::record("index_rows", out, {x}, [index, in_shape, row_elems](const Tensor& g) {
    Tensor grad_x = Tensor::zeros(in_shape, g.dtype(), g.device());
    kernels::scatter_rows(g, index, row_elems, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

Tensor index_rows(const Tensor& x, const Tensor& index) {
  check_defined("index_rows", "x", x);
  return index_rows(x, RowIndex(index, x.device()));
}

namespace {
template <class Mask>
Tensor positions_of_set_entries(const Mask& mask) {
  GAT_CHECK(mask.size() <= static_cast<size_t>(INT32_MAX), "mask_to_index: ", mask.size(),
            " entries exceed the i32 range");
  std::vector<int32_t> positions;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) positions.push_back(static_cast<int32_t>(i));
  return Tensor::from_vector(positions, {static_cast<int64_t>(positions.size())});
}
}  // namespace

Tensor mask_to_index(const std::vector<bool>& mask) { return positions_of_set_entries(mask); }
Tensor mask_to_index(const std::vector<uint8_t>& mask) { return positions_of_set_entries(mask); }

}  // namespace gat::ops
