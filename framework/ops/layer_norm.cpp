#include "gat/framework/ops/layer_norm.h"

#include <cmath>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/affine_norm.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

using detail::data_or_null;

// weight or bias: undefined, or (D,) of x's dtype and device.
void check_affine(const char* arg, const Tensor& t, const Tensor& x, int64_t D) {
  if (!t.defined()) return;
  check_same("layer_norm", "x", x, arg, t);
  check_shape("layer_norm", arg, t, {D});
}

}  // namespace

namespace kernels {
void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                        Tensor& mean, Tensor& rstd) {
  if (x.is_cuda())
    GAT_CUDA_CALL(cuda_impl::layer_norm_forward(x, weight, bias, eps, out, mean, rstd));
  else
    cpu_impl::layer_norm_forward(x, weight, bias, eps, out, mean, rstd);
}
void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& grad_out, Tensor& grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  if (x.is_cuda())
    GAT_CUDA_CALL(
        cuda_impl::layer_norm_backward(x, weight, mean, rstd, grad_out, grad_x, grad_weight, grad_bias));
  else
    cpu_impl::layer_norm_backward(x, weight, mean, rstd, grad_out, grad_x, grad_weight, grad_bias);
}
}  // namespace kernels

namespace cpu_impl {

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                        Tensor& mean, Tensor& rstd) {
  const int64_t D = x.size(-1), R = x.numel() / D;
  dispatch_float(x.dtype(), "layer_norm", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();              // (R, D)
    const T* pw = data_or_null<T>(weight);  // (D,) or null
    const T* pb = data_or_null<T>(bias);    // (D,) or null
    T* po = out.data<T>();                  // (R, D)
    T* pmean = mean.data<T>();              // (R,)
    T* prstd = rstd.data<T>();              // (R,)
    detail::parallel_for(
        R,
        [=](int64_t r) {
          const T* row = px + r * D;
          double sum = 0.0;
          for (int64_t d = 0; d < D; ++d) sum += static_cast<double>(row[d]);
          const T m = static_cast<T>(sum / static_cast<double>(D));
          double squares = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            const double centred = static_cast<double>(row[d] - m);
            squares += centred * centred;
          }
          const T s = static_cast<T>(1.0 / std::sqrt(squares / static_cast<double>(D) + eps));
          pmean[r] = m;
          prstd[r] = s;
          for (int64_t d = 0; d < D; ++d) {
            const T xhat = (row[d] - m) * s;
            po[r * D + d] = (pw ? xhat * pw[d] : xhat) + (pb ? pb[d] : T(0));
          }
        },
        4 * D);
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& grad_out, Tensor& grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  const int64_t D = x.size(-1), R = x.numel() / D;
  dispatch_float(x.dtype(), "layer_norm backward", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();              // (R, D)
    const T* pw = data_or_null<T>(weight);  // (D,) or null
    const T* pmean = mean.data<T>();        // (R,)
    const T* prstd = rstd.data<T>();        // (R,)
    const T* pg = grad_out.data<T>();       // (R, D)
    T* pdx = grad_x.data<T>();              // (R, D)
    detail::parallel_for(
        R,
        [=](int64_t r) {
          const T* row = px + r * D;
          const T* g = pg + r * D;
          const T m = pmean[r], s = prstd[r];
          double sum_gw = 0.0, sum_gw_xhat = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            const T gw = pw ? g[d] * pw[d] : g[d];
            sum_gw += static_cast<double>(gw);
            sum_gw_xhat += static_cast<double>(gw * ((row[d] - m) * s));
          }
          const T mean_gw = static_cast<T>(sum_gw / static_cast<double>(D));
          const T mean_gw_xhat = static_cast<T>(sum_gw_xhat / static_cast<double>(D));
          for (int64_t d = 0; d < D; ++d) {
            const T gw = pw ? g[d] * pw[d] : g[d];
            pdx[r * D + d] = s * (gw - mean_gw - (row[d] - m) * s * mean_gw_xhat);
          }
        },
        6 * D);
    if (grad_weight) {
      std::vector<T> g_xhat(static_cast<size_t>(R * D));  // (R, D): g * xhat
      T* pgx = g_xhat.data();
      detail::parallel_for(R * D,
                           [=](int64_t i) { pgx[i] = pg[i] * ((px[i] - pmean[i / D]) * prstd[i / D]); });
      detail::column_sums(pgx, R, D, grad_weight->data<T>());
    }
    if (grad_bias) detail::column_sums(pg, R, D, grad_bias->data<T>());
  });
}

}  // namespace cpu_impl

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_float("layer_norm", "x", x);
  GAT_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: 'x' ", x.describe(),
            " needs a non-empty last axis to normalise over");
  GAT_CHECK(eps >= 0, "layer_norm: invalid eps ", eps, " (must be >= 0)");
  const int64_t D = x.size(-1), R = x.numel() / D;
  check_affine("weight", weight, x, D);
  check_affine("bias", bias, x, D);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "layer_norm");
  Tensor mean = Tensor::empty({R}, x.dtype(), x.device(), "layer_norm mean");
  Tensor rstd = Tensor::empty({R}, x.dtype(), x.device(), "layer_norm rstd");
  kernels::layer_norm_forward(x, weight, bias, eps, out, mean, rstd);
  const Tensor x_saved = x.detach(), w_saved = weight.defined() ? weight.detach() : Tensor();
  return detail::record_affine_norm("layer_norm", out, x, weight, bias, D,
                                    [x_saved, w_saved, mean, rstd](const Tensor& g, Tensor& grad_x,
                                                                   Tensor* grad_weight, Tensor* grad_bias) {
                                      kernels::layer_norm_backward(x_saved, w_saved, mean, rstd, g, grad_x,
                                                                   grad_weight, grad_bias);
                                    });
}

}  // namespace gat::ops
