#include "gat/framework/ops/index_rows.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

void check_index(const Tensor& index, const char* op) {
  check_dtype(op, "index", index, DType::i32);
  check_dim(op, "index", index, 1);
  GAT_CHECK(index.numel() <= INT32_MAX, op, ": ", index.numel(), " indices exceed the i32 range");
}

}  // namespace

RowIndex::RowIndex(const Tensor& index, Device device, const char* op) {
  check_index(index, op);
  const std::vector<int32_t> values = index.to_vector<int32_t>();  // (K,)
  const auto count = static_cast<int32_t>(values.size());
  find_largest(values.data(), count, op);
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

RowIndex RowIndex::gather_only(const Tensor& index, Device device, const char* op) {
  RowIndex out;
  check_index(index, op);
  if (index.is_cuda()) {
    const std::vector<int32_t> values = index.to_vector<int32_t>();
    out.find_largest(values.data(), static_cast<int32_t>(values.size()), op);
  } else {
    out.find_largest(index.data<int32_t>(), static_cast<int32_t>(index.numel()), op);
  }
  out.index_ = index.device() == device ? index.clone() : index.to(device);  // the caller's index may change
  return out;
}

RowIndex RowIndex::unchecked(const Tensor& index) {
  RowIndex out;
  check_index(index, "RowIndex::unchecked");
  out.index_ = index;
  out.checked_ = false;
  return out;
}

void RowIndex::find_largest(const int32_t* values, int32_t count, const char* op) {
  for (int32_t k = 0; k < count; ++k) {
    GAT_CHECK(values[k] >= 0, op, ": index ", values[k], " at position ", k, " is negative");
    if (values[k] > max_index_) {
      max_index_ = values[k];
      max_position_ = k;
    }
  }
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

namespace {

// x viewed (outer, N, inner) around `axis`: slice o of it as (N, inner).
struct Slices {
  int64_t outer, n, inner;
  Tensor slice(const Tensor& t, int64_t o) const {
    return t.view({outer, n * inner}).rows(o, o + 1).view({n, inner});
  }
};

Slices slices_of(const Shape& shape, int64_t axis) {
  const auto at = shape.begin() + axis;
  return {shape_numel(Shape(shape.begin(), at)), *at, shape_numel(Shape(at + 1, shape.end()))};
}

Tensor index_along(const char* op, const Tensor& x, int64_t axis, const RowIndex& index) {
  check_defined(op, "x", x);
  // (The gather moves 4-byte words; bf16 rows go through f32, which keeps their bits.)
  if (detail::bf16_in_f32(op, x))
    return detail::rounded_to_bf16(index_along(op, detail::widened(x), axis, index));
  const int64_t a = axis < 0 ? axis + x.dim() : axis;
  GAT_CHECK(a >= 0 && a < x.dim(), op, ": axis ", axis, " is out of range for 'x' ", x.describe());
  GAT_CHECK(index.index().defined(), op, ": the RowIndex is empty (default-constructed)");
  GAT_CHECK(index.checked(), op, ": the RowIndex is unchecked (RowIndex::unchecked): its range is unknown");
  GAT_CHECK(index.device() == x.device(), op, ": the index is on ", device_name(index.device()), " but 'x' ",
            x.describe(), " is not");
  GAT_CHECK(index.max_index() < x.size(a), op, ": index ", index.max_index(), " at position ",
            index.max_position(), " is out of range for axis ", axis, " of 'x' ", x.describe(), " (length ",
            x.size(a), ")");
  GAT_CHECK(index.has_backward_plan() || !autograd::needs_grad({x}), op, ": 'x' ", x.describe(),
            " needs a gradient but the RowIndex has no backward plan (RowIndex::gather_only)");
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(a)] = index.size();
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), op);
  const Slices from = slices_of(x.shape(), a), to = slices_of(out_shape, a);
  const int64_t row_words = from.inner * static_cast<int64_t>(dtype_size(x.dtype())) / 4;
  for (int64_t o = 0; o < from.outer && out.numel() > 0; ++o) {
    Tensor part = to.slice(out, o);
    kernels::gather_rows(from.slice(x, o), index, row_words, part);
  }
  const Shape& in_shape = x.shape();
  return autograd::record(op, out, {x}, [index, in_shape, from, to](const Tensor& g) {
    Tensor grad_x = Tensor::zeros(in_shape, g.dtype(), g.device());
    for (int64_t o = 0; o < from.outer && g.numel() > 0; ++o) {
      Tensor part = from.slice(grad_x, o);
      kernels::scatter_rows(to.slice(g, o), index, from.inner, part);
    }
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace

Tensor index_rows(const Tensor& x, const RowIndex& index) {
  check_defined("index_rows", "x", x);
  GAT_CHECK(x.dim() >= 1, "index_rows: 'x' must have at least one dimension, got ", x.describe());
  return index_along("index_rows", x, 0, index);
}

namespace {

// The plan for a gather of x by a fresh index: without the backward's part (a sort of the
// indices) when no gradient will be recorded.
RowIndex plan_for(const Tensor& x, const Tensor& index, const char* op) {
  return autograd::needs_grad({x}) ? RowIndex(index, x.device(), op)
                                   : RowIndex::gather_only(index, x.device(), op);
}

}  // namespace

Tensor index_rows(const Tensor& x, const Tensor& index) {
  check_defined("index_rows", "x", x);
  return index_rows(x, plan_for(x, index, "index_rows"));
}

Tensor index_select(const Tensor& x, int64_t axis, const RowIndex& index) {
  return index_along("index_select", x, axis, index);
}

Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  check_defined("index_select", "x", x);
  return index_along("index_select", x, axis, plan_for(x, index, "index_select"));
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
