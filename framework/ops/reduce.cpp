#include "gat/framework/ops/reduce.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

constexpr int64_t kSumChunk = 8192;  // elements along the axis one CPU thread adds
constexpr int64_t kSumColumns = 16;  // outputs one CPU thread adds side by side

// acc[c] += base[l * stride + c] for c in [0, width) and l in [0, rows), each acc[c] in l order:
// one add chain per column, kept apart so that the chains overlap (a column at a time was one
// chain of dependent double adds, its latency for every element). Constant width: vectorised.
template <class T, class Width>
void add_column_block(const T* base, int64_t rows, int64_t stride, Width width, double* acc) {
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t c = 0; c < width; ++c) acc[c] += static_cast<double>(base[l * stride + c]);
}

void sum_axis(const Tensor& x, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  // Fixed chunks along the axis: each (output, chunk) pair is summed by one thread, then each
  // output adds its chunks in order. The order depends only on the shape, not the thread count.
  // A thread adds a block of up to kSumColumns neighbouring outputs of one chunk together.
  const int64_t outputs = outer * inner;
  const int64_t chunks = len > kSumChunk ? (len + kSumChunk - 1) / kSumChunk : 1;
  const int64_t blocks = (inner + kSumColumns - 1) / kSumColumns;      // column blocks per outer index
  std::vector<double> partial(static_cast<size_t>(outputs * chunks));  // (outer, inner, chunks)
  dispatch_float(x.dtype(), "sum", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (outer, len, inner)
    T* po = out.data<T>();      // (outer, inner)
    detail::parallel_for(
        outer * blocks * chunks,
        [&](int64_t item) {  // item = (o * blocks + block) * chunks + chunk
          const int64_t chunk = item % chunks, block = item / chunks % blocks, o = item / chunks / blocks;
          const int64_t begin = chunk * kSumChunk, rows = std::min(len, begin + kSumChunk) - begin;
          const int64_t first = block * kSumColumns, width = std::min(inner - first, kSumColumns);
          const T* base = px + (o * len + begin) * inner + first;
          double acc[kSumColumns] = {};
          if (width == kSumColumns)
            add_column_block(base, rows, inner, std::integral_constant<int64_t, kSumColumns>{}, acc);
          else
            add_column_block(base, rows, inner, width, acc);
          for (int64_t c = 0; c < width; ++c)
            partial[static_cast<size_t>((o * inner + first + c) * chunks + chunk)] = acc[c];
        },
        std::min(len, kSumChunk) * kSumColumns);
    detail::parallel_for(
        outputs,
        [&](int64_t r) {
          double acc = 0.0;
          for (int64_t c = 0; c < chunks; ++c) acc += partial[static_cast<size_t>(r * chunks + c)];
          po[r] = static_cast<T>(acc);
        },
        chunks);
  });
}

void expand_axis(const Tensor& g, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  dispatch_float(g.dtype(), "sum backward", [&](auto zero) {
    using T = decltype(zero);
    const T* pg = g.data<T>();  // (outer, inner)
    T* po = out.data<T>();      // (outer, len, inner)
    detail::parallel_for(
        outer * len,
        [&](int64_t ol) {
          const T* src = pg + (ol / len) * inner;
          for (int64_t i = 0; i < inner; ++i) po[ol * inner + i] = src[i];
        },
        inner);
  });
}

}  // namespace cpu_impl

namespace kernels {

void sum_axis(const Tensor& x, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::sum_axis(x, outer, len, inner, out));
  cpu_impl::sum_axis(x, outer, len, inner, out);
}

void expand_axis(const Tensor& g, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  if (g.is_cuda()) return GAT_CUDA_CALL(cuda_impl::expand_axis(g, outer, len, inner, out));
  cpu_impl::expand_axis(g, outer, len, inner, out);
}

}  // namespace kernels

namespace {

// x viewed (outer, len, inner) -> (outer, inner) with shape out_shape; no autograd.
Tensor sum_values(const Tensor& x, int64_t outer, int64_t len, int64_t inner, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device(), "sum");
  kernels::sum_axis(x, outer, len, inner, out);
  return out;
}

// g viewed (outer, inner) -> (outer, len, inner) with shape out_shape; no autograd.
Tensor expand_values(const Tensor& g, int64_t outer, int64_t len, int64_t inner, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, g.dtype(), g.device(), "sum backward");
  kernels::expand_axis(g, outer, len, inner, out);
  return out;
}

// The recorded reduction of x viewed (outer, len, inner) to out_shape.
Tensor sum_recorded(const Tensor& x, int64_t outer, int64_t len, int64_t inner, const Shape& out_shape) {
  const Shape& in_shape = x.shape();
  return autograd::record("sum", sum_values(x, outer, len, inner, out_shape), {x}, [=](const Tensor& g) {
    return std::vector<Tensor>{expand_values(g, outer, len, inner, in_shape)};
  });
}

// Resolves a possibly negative axis of x, naming the op when it is out of range.
int64_t resolve_axis(const char* op, const Tensor& x, int64_t axis) {
  const int64_t resolved = axis < 0 ? axis + x.dim() : axis;
  GAT_CHECK(resolved >= 0 && resolved < x.dim(), op, ": axis ", axis, " is out of range for 'x' ",
            x.describe());
  return resolved;
}

}  // namespace

Tensor sum(const Tensor& x) {
  check_float("sum", "x", x);
  return sum_recorded(x, 1, x.numel(), 1, {});
}

Tensor mean(const Tensor& x) {
  check_float("mean", "x", x);
  GAT_CHECK(x.numel() > 0, "mean: 'x' ", x.describe(), " has no elements");
  return scale(sum(x), 1.0 / static_cast<double>(x.numel()));
}

Tensor sum(const Tensor& x, int64_t axis) {
  check_float("sum", "x", x);
  const size_t a = static_cast<size_t>(resolve_axis("sum", x, axis));
  const Shape& shape = x.shape();
  const int64_t outer = shape_numel(Shape(shape.begin(), shape.begin() + a));
  const int64_t inner = shape_numel(Shape(shape.begin() + a + 1, shape.end()));
  Shape out_shape = shape;
  out_shape.erase(out_shape.begin() + a);
  return sum_recorded(x, outer, shape[a], inner, out_shape);
}

Tensor mean(const Tensor& x, int64_t axis) {
  check_float("mean", "x", x);
  const int64_t len = x.shape()[static_cast<size_t>(resolve_axis("mean", x, axis))];
  GAT_CHECK(len > 0, "mean: axis ", axis, " of 'x' ", x.describe(), " has length 0");
  return scale(sum(x, axis), 1.0 / static_cast<double>(len));
}

}  // namespace gat::ops
