#include "gat/framework/ops/attention/head_dot.h"

#include <algorithm>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"

namespace gat::ops {

namespace cpu_impl {

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  const int64_t N = x.size(0), H = x.size(1), F = x.size(2);
  dispatch_float(x.dtype(), "head_dot", [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data<T>();  // (N, H, F)
    const T* ap = a.data<T>();  // (H, F)
    T* o = out.data<T>();       // (N, H)
#pragma omp parallel for if (N * H * F > detail::kParallelThreshold)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h) {
        T acc = 0;
        for (int64_t f = 0; f < F; ++f) acc += xp[(n * H + h) * F + f] * ap[h * F + f];
        o[n * H + h] = acc;
      }
  });
}

namespace {

// d a[h,f] = sum_n g[n,h] x[n,h,f]. Stage 1: one partial (H, F) per block of rows; stage 2: the
// partials summed in order.
void grad_a_sums(const Tensor& x, const Tensor& grad_out, Tensor& grad_a) {
  const int64_t N = x.size(0), H = x.size(1), F = x.size(2), HF = H * F;
  dispatch_float(x.dtype(), "head_dot backward", [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data<T>();        // (N, H, F)
    const T* g = grad_out.data<T>();  // (N, H)
    const int64_t rows = head_dot_detail::rows_per_block(N);
    const int64_t blocks = (N + rows - 1) / rows;
    std::vector<T> partial(static_cast<size_t>(blocks * HF), T(0));  // (blocks, H, F)
#pragma omp parallel for if (N * HF > detail::kParallelThreshold)
    for (int64_t b = 0; b < blocks; ++b) {
      T* p = partial.data() + b * HF;
      for (int64_t n = b * rows; n < std::min(N, (b + 1) * rows); ++n)
        for (int64_t h = 0; h < H; ++h) {
          const T gh = g[n * H + h];
          for (int64_t f = 0; f < F; ++f) p[h * F + f] += gh * xp[(n * H + h) * F + f];
        }
    }
    T* da = grad_a.data<T>();  // (H, F)
    std::fill(da, da + HF, T(0));
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = 0; c < HF; ++c) da[c] += partial[b * HF + c];
  });
}

}  // namespace

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  const int64_t N = x.size(0), H = x.size(1), F = x.size(2), HF = H * F;
  if (grad_x) {
    dispatch_float(x.dtype(), "head_dot backward", [&](auto zero) {
      using T = decltype(zero);
      const T* ap = a.data<T>();        // (H, F)
      const T* g = grad_out.data<T>();  // (N, H)
      T* dx = grad_x->data<T>();        // (N, H, F)
#pragma omp parallel for if (N * HF > detail::kParallelThreshold)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t h = 0; h < H; ++h) {
          const T gh = g[n * H + h];
          for (int64_t f = 0; f < F; ++f) dx[(n * H + h) * F + f] = gh * ap[h * F + f];
        }
    });
  }
  if (grad_a) grad_a_sums(x, grad_out, *grad_a);
}

// The CPU reads x three times: the one pass saves launches and reads on CUDA, nothing here.
void head_dot_pair_dropout_forward(const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                                   double keep_scale, KeepMask& kept, Tensor& out1, Tensor& out2,
                                   Tensor* values, Tensor*) {
  head_dot_forward(x, a1, out1);
  head_dot_forward(x, a2, out2);
  if (values) dropout_forward(x, key, keep_scale, *values, kept);
}

void head_dot_pair_grad_a(const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1,
                          Tensor& grad_a2) {
  grad_a_sums(x, g1, grad_a1);
  grad_a_sums(x, g2, grad_a2);
}

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask& kept,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  const int64_t N = base.size(0), H = base.size(1), F = base.size(2);
  dispatch_float(base.dtype(), "head_dot_pair_grad_x", [&](auto zero) {
    using T = decltype(zero);
    const T* b = base.data<T>();                     // (N, H, F)
    const T *p1 = a1.data<T>(), *p2 = a2.data<T>();  // (H, F)
    const T *q1 = g1.data<T>(), *q2 = g2.data<T>();  // (N, H)
    T* dx = grad_x.data<T>();                        // (N, H, F)
    const T s = static_cast<T>(keep_scale);
    const uint8_t* keep = key.active() ? kept.data() : nullptr;  // (N, H, F) or null
    // Row by row: no division per element.
    detail::parallel_for(
        N,
        [=](int64_t n) {
          for (int64_t h = 0; h < H; ++h) {
            const int64_t r = n * H + h;
            for (int64_t f = 0; f < F; ++f) {
              const int64_t i = r * F + f;
              const T kept_base = keep ? DropoutKey::apply_kept(b[i], keep[i], s) : b[i];
              dx[i] = kept_base + q1[r] * p1[h * F + f] + q2[r] * p2[h * F + f];
            }
          }
        },
        H * F);
  });
}

}  // namespace cpu_impl

namespace kernels {

void head_dot_pair_dropout_forward(const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                                   double keep_scale, KeepMask& kept, Tensor& out1, Tensor& out2,
                                   Tensor* values, Tensor* rows) {
  if (x.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::head_dot_pair_dropout_forward(x, a1, a2, key, keep_scale, kept, out1, out2, values, rows));
  GAT_CHECK(!rows, "head_dot_pair_dropout_forward: packed rows are written on CUDA only");
  cpu_impl::head_dot_pair_dropout_forward(x, a1, a2, key, keep_scale, kept, out1, out2, values, rows);
}

void head_dot_pair_grad_a(const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1,
                          Tensor& grad_a2) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_pair_grad_a(x, g1, g2, grad_a1, grad_a2));
  cpu_impl::head_dot_pair_grad_a(x, g1, g2, grad_a1, grad_a2);
}

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask& kept,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  if (grad_x.numel() == 0) return;
  if (grad_x.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2, grad_x));
  cpu_impl::head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2, grad_x);
}

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_forward(x, a, out));
  cpu_impl::head_dot_forward(x, a, out);
}

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_backward(x, a, grad_out, grad_x, grad_a));
  cpu_impl::head_dot_backward(x, a, grad_out, grad_x, grad_a);
}

}  // namespace kernels

Tensor head_dot(const Tensor& x, const Tensor& a) {
  const char* op = "head_dot";
  if (detail::bf16_in_f32(op, x, a))
    return detail::rounded_to_bf16(head_dot(detail::widened(x), detail::widened(a)));
  check_float(op, "x", x);
  check_dim(op, "x", x, 3);
  check_same(op, "x", x, "a", a);
  check_shape(op, "a", a, {x.size(1), x.size(2)});

  Tensor out = Tensor::empty({x.size(0), x.size(1)}, x.dtype(), x.device(), op);
  kernels::head_dot_forward(x, a, out);

  const bool need_x = x.requires_grad(), need_a = a.requires_grad();
  return autograd::record(op, out, {x, a},
                          [xd = x.detach(), ad = a.detach(), need_x, need_a](const Tensor& grad_out) {
                            check_same("head_dot backward", "grad_out", grad_out, "x", xd);
                            check_shape("head_dot backward", "grad_out", grad_out, {xd.size(0), xd.size(1)});
                            Tensor dx, da;
                            if (need_x) dx = Tensor::empty(xd.shape(), xd.dtype(), xd.device(), "d x");
                            if (need_a) da = Tensor::empty(ad.shape(), ad.dtype(), ad.device(), "d a");
                            Tensor* px = need_x ? &dx : nullptr;
                            Tensor* pa = need_a ? &da : nullptr;
                            kernels::head_dot_backward(xd, ad, grad_out, px, pa);
                            return std::vector<Tensor>{dx, da};
                          });
}

}  // namespace gat::ops
