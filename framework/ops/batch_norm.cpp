#include "gat/framework/ops/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/affine_norm.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

using detail::data_or_null;

// An optional per-channel tensor: undefined, or (C,) of x's dtype and device.
void check_channels(const char* arg, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  check_same("batch_norm", "x", x, arg, t);
  check_shape("batch_norm", arg, t, {x.size(1)});
}

}  // namespace

namespace kernels {
void batch_norm_statistics(const Tensor& x, Tensor& mean, Tensor& var) {
  if (x.is_cuda())
    GAT_CUDA_CALL(cuda_impl::batch_norm_statistics(x, mean, var));
  else
    cpu_impl::batch_norm_statistics(x, mean, var);
}
void batch_norm_update_running(const Tensor& mean, const Tensor& var, int64_t N, double momentum,
                               Tensor& running_mean, Tensor& running_var) {
  if (mean.is_cuda())
    GAT_CUDA_CALL(cuda_impl::batch_norm_update_running(mean, var, N, momentum, running_mean, running_var));
  else
    cpu_impl::batch_norm_update_running(mean, var, N, momentum, running_mean, running_var);
}
void batch_norm_forward(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                        const Tensor& bias, double eps, Tensor& out, Tensor& rstd) {
  if (x.is_cuda())
    GAT_CUDA_CALL(cuda_impl::batch_norm_forward(x, mean, var, weight, bias, eps, out, rstd));
  else
    cpu_impl::batch_norm_forward(x, mean, var, weight, bias, eps, out, rstd);
}
void batch_norm_backward(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_out, bool training, Tensor& grad_x, Tensor* grad_weight,
                         Tensor* grad_bias) {
  if (x.is_cuda())
    GAT_CUDA_CALL(cuda_impl::batch_norm_backward(x, mean, rstd, weight, grad_out, training, grad_x,
                                                 grad_weight, grad_bias));
  else
    cpu_impl::batch_norm_backward(x, mean, rstd, weight, grad_out, training, grad_x, grad_weight, grad_bias);
}
}  // namespace kernels

namespace cpu_impl {

void batch_norm_statistics(const Tensor& x, Tensor& mean, Tensor& var) {
  const int64_t N = x.size(0), C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (N, C)
    T* pmean = mean.data<T>();  // (C,)
    T* pvar = var.data<T>();    // (C,)
    detail::column_sums(px, N, C, pmean);
    for (int64_t c = 0; c < C; ++c) pmean[c] /= static_cast<T>(N);
    std::vector<T> squares(static_cast<size_t>(N * C));  // (N, C): (x - mean)^2
    T* psq = squares.data();
    detail::parallel_for(N * C, [=](int64_t i) {
      const T centred = px[i] - pmean[i % C];
      psq[i] = centred * centred;
    });
    detail::column_sums(psq, N, C, pvar);
    for (int64_t c = 0; c < C; ++c) pvar[c] /= static_cast<T>(N);
  });
}

void batch_norm_update_running(const Tensor& mean, const Tensor& var, int64_t N, double momentum,
                               Tensor& running_mean, Tensor& running_var) {
  dispatch_float(mean.dtype(), "batch_norm running statistics", [&](auto zero) {
    using T = decltype(zero);
    const T* pmean = mean.data<T>();  // (C,)
    const T* pvar = var.data<T>();    // (C,)
    T* prm = running_mean.data<T>();  // (C,)
    T* prv = running_var.data<T>();   // (C,)
    const T m = static_cast<T>(momentum), unbias = static_cast<T>(N) / static_cast<T>(N - 1);
    for (int64_t c = 0; c < mean.numel(); ++c) {
      prm[c] = m * pmean[c] + (T(1) - m) * prm[c];
      prv[c] = m * (pvar[c] * unbias) + (T(1) - m) * prv[c];
    }
  });
}

void batch_norm_forward(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                        const Tensor& bias, double eps, Tensor& out, Tensor& rstd) {
  const int64_t C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();              // (N, C)
    const T* pmean = mean.data<T>();        // (C,)
    const T* pvar = var.data<T>();          // (C,)
    const T* pw = data_or_null<T>(weight);  // (C,) or null
    const T* pb = data_or_null<T>(bias);    // (C,) or null
    T* prstd = rstd.data<T>();              // (C,)
    T* po = out.data<T>();                  // (N, C)
    for (int64_t c = 0; c < C; ++c) prstd[c] = T(1) / std::sqrt(pvar[c] + static_cast<T>(eps));
    detail::parallel_for(out.numel(), [=](int64_t i) {
      const int64_t c = i % C;
      const T xhat = (px[i] - pmean[c]) * prstd[c];
      po[i] = (pw ? xhat * pw[c] : xhat) + (pb ? pb[c] : T(0));
    });
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_out, bool training, Tensor& grad_x, Tensor* grad_weight,
                         Tensor* grad_bias) {
  const int64_t N = x.size(0), C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm backward", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();              // (N, C)
    const T* pmean = mean.data<T>();        // (C,)
    const T* prstd = rstd.data<T>();        // (C,)
    const T* pw = data_or_null<T>(weight);  // (C,) or null
    const T* pg = grad_out.data<T>();       // (N, C)
    T* pdx = grad_x.data<T>();              // (N, C)
    std::vector<T> g_xhat(static_cast<size_t>(N * C)), sum_g(static_cast<size_t>(C)),
        sum_g_xhat(static_cast<size_t>(C));  // (N, C), (C,), (C,)
    T* pgx = g_xhat.data();
    detail::parallel_for(N * C, [=](int64_t i) { pgx[i] = pg[i] * ((px[i] - pmean[i % C]) * prstd[i % C]); });
    detail::column_sums(pgx, N, C, sum_g_xhat.data());
    detail::column_sums(pg, N, C, sum_g.data());
    const T* psg = sum_g.data();
    const T* psgx = sum_g_xhat.data();
    const T n = static_cast<T>(N);
    detail::parallel_for(N * C, [=](int64_t i) {
      const int64_t c = i % C;
      const T scale = pw ? pw[c] * prstd[c] : prstd[c];
      pdx[i] = training ? scale * (pg[i] - psg[c] / n - (px[i] - pmean[c]) * prstd[c] * psgx[c] / n)
                        : scale * pg[i];
    });
    if (grad_weight) std::copy(sum_g_xhat.begin(), sum_g_xhat.end(), grad_weight->data<T>());
    if (grad_bias) std::copy(sum_g.begin(), sum_g.end(), grad_bias->data<T>());
  });
}

}  // namespace cpu_impl

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  check_float("batch_norm", "x", x);
  check_dim("batch_norm", "x", x, 2);
  check_channels("running_mean", running_mean, x);
  check_channels("running_var", running_var, x);
  check_channels("weight", weight, x);
  check_channels("bias", bias, x);
  GAT_CHECK(running_mean.defined() == running_var.defined(),
            "batch_norm: running_mean and running_var must be given together");
  GAT_CHECK(momentum >= 0 && momentum <= 1, "batch_norm: invalid momentum ", momentum,
            " (must be in [0, 1])");
  GAT_CHECK(eps >= 0, "batch_norm: invalid eps ", eps, " (must be >= 0)");
  const int64_t N = x.size(0), C = x.size(1);
  GAT_CHECK(!training || N >= 2, "batch_norm: training needs at least 2 rows per channel, 'x' is ",
            x.describe());
  GAT_CHECK(training || running_mean.defined(),
            "batch_norm: evaluation needs running_mean and running_var (or training = true)");
  Tensor mean = running_mean, var = running_var;
  if (training) {
    mean = Tensor::empty({C}, x.dtype(), x.device(), "batch_norm mean");
    var = Tensor::empty({C}, x.dtype(), x.device(), "batch_norm var");
    kernels::batch_norm_statistics(x, mean, var);
    if (running_mean.defined()) {
      Tensor rm = running_mean, rv = running_var;
      kernels::batch_norm_update_running(mean, var, N, momentum, rm, rv);
      rm.mark_modified();
      rv.mark_modified();
    }
  } else {  // the running statistics as they are now: later updates must not change this backward
    mean = running_mean.detach().clone();
  }
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "batch_norm");
  Tensor rstd = Tensor::empty({C}, x.dtype(), x.device(), "batch_norm rstd");
  kernels::batch_norm_forward(x, mean, var, weight, bias, eps, out, rstd);
  const Tensor x_saved = x.detach(), w_saved = weight.defined() ? weight.detach() : Tensor();
  return detail::record_affine_norm(
      "batch_norm", out, x, weight, bias, C,
      [x_saved, w_saved, mean, rstd, training](const Tensor& g, Tensor& grad_x, Tensor* grad_weight,
                                               Tensor* grad_bias) {
        kernels::batch_norm_backward(x_saved, mean, rstd, w_saved, g, training, grad_x, grad_weight,
                                     grad_bias);
      });
}

}  // namespace gat::ops
