#include "gat/framework/ops/log_softmax.h"

#include <algorithm>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

struct AxisView {
  int64_t outer, len, inner;
};

// x seen as (outer, len, inner) around `axis`; throws naming the op for a bad axis.
AxisView view_around(const char* op, const Tensor& x, int64_t axis) {
  GAT_CHECK(x.dim() >= 1, op, ": 'x' ", x.describe(), " must have at least one dimension");
  const int64_t a = axis < 0 ? axis + x.dim() : axis;
  GAT_CHECK(a >= 0 && a < x.dim(), op, ": axis ", axis, " is out of range for 'x' ", x.describe());
  const Shape& s = x.shape();
  return {shape_numel(Shape(s.begin(), s.begin() + a)), s[static_cast<size_t>(a)],
          shape_numel(Shape(s.begin() + a + 1, s.end()))};
}

Tensor softmax_op(const char* op, const Tensor& x, int64_t axis, bool log) {
  if (detail::bf16_in_f32(op, x))
    return detail::rounded_to_bf16(softmax_op(op, detail::widened(x), axis, log));
  check_float(op, "x", x);
  const AxisView v = view_around(op, x, axis);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
  kernels::softmax_forward(x, v.outer, v.len, v.inner, log, out);
  return autograd::record(op, out, {x}, [op, v, log, out = out.detach()](const Tensor& grad_out) {
    Tensor grad_x = Tensor::empty(out.shape(), out.dtype(), out.device(), op);
    kernels::softmax_backward(out, grad_out, v.outer, v.len, v.inner, log, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace

Tensor log_softmax(const Tensor& x, int64_t axis) { return softmax_op("log_softmax", x, axis, true); }
Tensor softmax(const Tensor& x, int64_t axis) { return softmax_op("softmax", x, axis, false); }

namespace kernels {
void softmax_forward(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::softmax_forward(x, outer, len, inner, log, out));
  cpu_impl::softmax_forward(x, outer, len, inner, log, out);
}
void softmax_backward(const Tensor& out, const Tensor& grad_out, int64_t outer, int64_t len, int64_t inner,
                      bool log, Tensor& grad_x) {
  if (out.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::softmax_backward(out, grad_out, outer, len, inner, log, grad_x));
  cpu_impl::softmax_backward(out, grad_out, outer, len, inner, log, grad_x);
}
}  // namespace kernels

namespace cpu_impl {

namespace {

// Columns of one (outer) slab handled together when the axis is strided (inner > 1): the loops
// over them are contiguous, and a slab splits into tasks for the threads.
constexpr int64_t kColumns = 256;

// The task list of a strided pass: (outer, first column, column count).
template <class F>
void for_column_blocks(int64_t outer, int64_t len, int64_t inner, F f) {
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  detail::parallel_for(
      outer * blocks,
      [&](int64_t task) {
        const int64_t o = task / blocks, i0 = task % blocks * kColumns;
        f(o, i0, std::min(kColumns, inner - i0));
      },
      len * std::min(kColumns, inner));
}

}  // namespace

void softmax_forward(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, Tensor& out) {
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.data<T>();  // (outer, len, inner)
    T* o = out.data<T>();       // (outer, len, inner)
    auto finish = [log](T v, T lse) { return log ? v - lse : std::exp(v - lse); };
    if (inner == 1) {  // contiguous rows
      detail::parallel_for(
          outer,
          [&](int64_t r) {
            const T lse = row_logsumexp(in + r * len, len);
            for (int64_t c = 0; c < len; ++c) o[r * len + c] = finish(in[r * len + c], lse);
          },
          len);
      return;
    }
    for_column_blocks(outer, len, inner, [&](int64_t b, int64_t i0, int64_t count) {
      const T* slab = in + b * len * inner + i0;  // column k of the block: slab[l * inner + k]
      T* out_slab = o + b * len * inner + i0;
      T max[kColumns], sum[kColumns];
      std::fill(max, max + count, -std::numeric_limits<T>::infinity());
      std::fill(sum, sum + count, T(0));
      for (int64_t l = 0; l < len; ++l)
        for (int64_t k = 0; k < count; ++k)
          max[k] = slab[l * inner + k] > max[k] ? slab[l * inner + k] : max[k];
      for (int64_t l = 0; l < len; ++l)
        for (int64_t k = 0; k < count; ++k) sum[k] += std::exp(slab[l * inner + k] - max[k]);
      for (int64_t k = 0; k < count; ++k)  // as row_logsumexp: -inf for a column of -inf
        max[k] = max[k] == -std::numeric_limits<T>::infinity() ? max[k] : max[k] + std::log(sum[k]);
      for (int64_t l = 0; l < len; ++l)
        for (int64_t k = 0; k < count; ++k) out_slab[l * inner + k] = finish(slab[l * inner + k], max[k]);
    });
  });
}

void softmax_backward(const Tensor& out, const Tensor& grad_out, int64_t outer, int64_t len, int64_t inner,
                      bool log, Tensor& grad_x) {
  dispatch_float(out.dtype(), log ? "log_softmax" : "softmax", [&](auto zero) {
    using T = decltype(zero);
    const T* y = out.data<T>();       // (outer, len, inner)
    const T* g = grad_out.data<T>();  // (outer, len, inner)
    T* dx = grad_x.data<T>();         // (outer, len, inner)
    // log: sum G, dx = G - exp(y) sum;  softmax: sum G y, dx = y (G - sum)
    auto term = [log](T yv, T gv) { return log ? gv : gv * yv; };
    auto grad = [log](T yv, T gv, T sum) { return log ? gv - std::exp(yv) * sum : yv * (gv - sum); };
    if (inner == 1) {
      detail::parallel_for(
          outer,
          [&](int64_t r) {
            T sum = 0;
            for (int64_t c = 0; c < len; ++c) sum += term(y[r * len + c], g[r * len + c]);
            for (int64_t c = 0; c < len; ++c) dx[r * len + c] = grad(y[r * len + c], g[r * len + c], sum);
          },
          len);
      return;
    }
    for_column_blocks(outer, len, inner, [&](int64_t b, int64_t i0, int64_t count) {
      const int64_t base = b * len * inner + i0;  // column k of the block: [base + l * inner + k]
      T sum[kColumns];
      std::fill(sum, sum + count, T(0));
      for (int64_t l = 0; l < len; ++l)
        for (int64_t k = 0; k < count; ++k) sum[k] += term(y[base + l * inner + k], g[base + l * inner + k]);
      for (int64_t l = 0; l < len; ++l)
        for (int64_t k = 0; k < count; ++k) {
          const int64_t at = base + l * inner + k;
          dx[at] = grad(y[at], g[at], sum[k]);
        }
    });
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
