#include "gat/framework/ops/head_mean.h"

#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops {

namespace cpu_impl {

void head_mean_forward(const Tensor& x, const Tensor* bias, Tensor& out) {
  const int64_t H = x.size(1), F = x.size(2);
  dispatch_float(x.dtype(), "head_mean", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();                       // (N, H, F)
    const T* pb = bias ? bias->data<T>() : nullptr;  // (F,)
    T* po = out.data<T>();                           // (N, F)
    const T inv_h = static_cast<T>(1.0 / static_cast<double>(H));
    detail::parallel_for(
        out.numel(),
        [=](int64_t i) {
          const int64_t n = i / F, f = i % F;
          double acc = 0.0;  // as ops::sum's CPU kernel
          for (int64_t h = 0; h < H; ++h) acc += px[(n * H + h) * F + f];
          const T mean = static_cast<T>(acc) * inv_h;
          po[i] = pb ? mean + pb[f] : mean;
        },
        H);
  });
}

void head_mean_backward(const Tensor& grad_out, Tensor& grad_x) {
  const int64_t H = grad_x.size(1), F = grad_x.size(2);
  dispatch_float(grad_out.dtype(), "head_mean backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = grad_out.data<T>();  // (N, F)
    T* dx = grad_x.data<T>();         // (N, H, F)
    const T inv_h = static_cast<T>(1.0 / static_cast<double>(H));
    detail::parallel_for(grad_x.numel(), [=](int64_t i) { dx[i] = g[i / (H * F) * F + i % F] * inv_h; });
  });
}

}  // namespace cpu_impl

namespace kernels {

void head_mean_forward(const Tensor& x, const Tensor* bias, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_mean_forward(x, bias, out));
  cpu_impl::head_mean_forward(x, bias, out);
}

void head_mean_backward(const Tensor& grad_out, Tensor& grad_x) {
  if (grad_out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_mean_backward(grad_out, grad_x));
  cpu_impl::head_mean_backward(grad_out, grad_x);
}

}  // namespace kernels

Tensor head_mean(const Tensor& x, const Tensor& bias) {
  const char* op = "head_mean";
  if (detail::bf16_in_f32(op, x, bias))
    return detail::rounded_to_bf16(head_mean(detail::widened(x), detail::widened(bias)));
  check_float(op, "x", x);
  check_dim(op, "x", x, 3);
  GAT_CHECK(x.size(1) > 0, op, ": 'x' ", x.describe(), " has no heads to average");
  if (bias.defined()) {
    check_same(op, "x", x, "bias", bias);
    check_shape(op, "bias", bias, {x.size(2)});
  }
  Tensor out = Tensor::empty({x.size(0), x.size(2)}, x.dtype(), x.device(), op);  // (N, F)
  kernels::head_mean_forward(x, bias.defined() ? &bias : nullptr, out);
  const bool need_x = x.requires_grad(), need_bias = bias.defined() && bias.requires_grad();
  return autograd::record(op, out, {x, bias}, [x_shape = x.shape(), need_x, need_bias](const Tensor& g) {
    Tensor grad_x, grad_bias;
    if (need_x) {
      grad_x = Tensor::empty(x_shape, g.dtype(), g.device(), "head_mean backward");  // (N, H, F)
      kernels::head_mean_backward(g, grad_x);
    }
    if (need_bias) grad_bias = sum(g, 0);  // (F,), as add_bias's
    return std::vector<Tensor>{grad_x, grad_bias};
  });
}

}  // namespace gat::ops
