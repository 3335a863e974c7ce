#include "gat/framework/ops/batch_norm.h"
#include "gat/framework/ops/detail/affine_norm.h"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/reduce.h"

// Every per-channel sum over the N rows is reduce.cu's deterministic column sum (sum_axis); the
// rest is elementwise, so no atomics and the same bits at every run.
namespace gat::ops::cuda_impl {

namespace {

using ops::detail::data_or_null;

// v[c] /= n over (C,).
template <class T>
struct DivideFn {
  T* v;  // (C,)
  T n;
  template <class I>
  __device__ void operator()(I c) const {
    v[c] /= n;
  }
};

// (x - mean)^2 over (N, C).
template <class T>
struct SquaredDeviationFn {
  const T* x;     // (N, C)
  const T* mean;  // (C,)
  long long C;
  T* out;  // (N, C)
  template <class I>
  __device__ void operator()(I i) const {
    const T centred = x[i] - mean[i % static_cast<I>(C)];
    out[i] = centred * centred;
  }
};

template <class T>
struct UpdateRunningFn {
  const T* mean;  // (C,)
  const T* var;   // (C,)
  T momentum, unbias;
  T* running_mean;  // (C,)
  T* running_var;   // (C,)
  template <class I>
  __device__ void operator()(I c) const {
    running_mean[c] = detail::mul_rn(momentum, mean[c]) + detail::mul_rn(T(1) - momentum, running_mean[c]);
    running_var[c] =
        detail::mul_rn(momentum, var[c] * unbias) + detail::mul_rn(T(1) - momentum, running_var[c]);
  }
};

template <class T>
struct RstdFn {
  const T* var;  // (C,)
  T eps;
  T* rstd;  // (C,)
  template <class I>
  __device__ void operator()(I c) const {
    rstd[c] = T(1) / sqrt(var[c] + eps);
  }
};

template <class T>
struct NormalizeFn {
  const T* x;       // (N, C)
  const T* mean;    // (C,)
  const T* rstd;    // (C,)
  const T* weight;  // (C,) or null
  const T* bias;    // (C,) or null
  long long C;
  T* out;  // (N, C)
  template <class I>
  __device__ void operator()(I i) const {
    const I c = i % static_cast<I>(C);
    const T xhat = (x[i] - mean[c]) * rstd[c];
    out[i] = (weight ? detail::mul_rn(xhat, weight[c]) : xhat) + (bias ? bias[c] : T(0));
  }
};

// g * xhat over (N, C): the terms of d weight.
template <class T>
struct GradXhatFn {
  const T* x;     // (N, C)
  const T* mean;  // (C,)
  const T* rstd;  // (C,)
  const T* g;     // (N, C)
  long long C;
  T* out;  // (N, C)
  template <class I>
  __device__ void operator()(I i) const {
    const I c = i % static_cast<I>(C);
    out[i] = g[i] * ((x[i] - mean[c]) * rstd[c]);
  }
};

template <class T>
struct GradInputFn {
  const T* x;           // (N, C)
  const T* mean;        // (C,)
  const T* rstd;        // (C,)
  const T* weight;      // (C,) or null
  const T* g;           // (N, C)
  const T* sum_g;       // (C,)
  const T* sum_g_xhat;  // (C,)
  long long C;
  T n;
  bool training;
  T* grad_x;  // (N, C)
  template <class I>
  __device__ void operator()(I i) const {
    const I c = i % static_cast<I>(C);
    const T scale = weight ? weight[c] * rstd[c] : rstd[c];
    grad_x[i] = training ? scale * (g[i] - sum_g[c] / n - (x[i] - mean[c]) * rstd[c] * sum_g_xhat[c] / n)
                         : scale * g[i];
  }
};

}  // namespace

void batch_norm_statistics(const Tensor& x, Tensor& mean, Tensor& var) {
  const long long N = x.size(0), C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm", [&](auto zero) {
    using T = decltype(zero);
    sum_axis(x, 1, N, C, mean);
    detail::launch_for_each("batch_norm mean", C, DivideFn<T>{mean.data<T>(), static_cast<T>(N)});
    Tensor squares = Tensor::empty({N, C}, x.dtype(), Device::cuda, "batch_norm squares");
    detail::launch_for_each("batch_norm squares", N * C,
                            SquaredDeviationFn<T>{x.data<T>(), mean.data<T>(), C, squares.data<T>()});
    sum_axis(squares, 1, N, C, var);
    detail::launch_for_each("batch_norm var", C, DivideFn<T>{var.data<T>(), static_cast<T>(N)});
  });
}

void batch_norm_update_running(const Tensor& mean, const Tensor& var, int64_t N, double momentum,
                               Tensor& running_mean, Tensor& running_var) {
  dispatch_float(mean.dtype(), "batch_norm running statistics", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("batch_norm running statistics", mean.numel(),
                            UpdateRunningFn<T>{mean.data<T>(), var.data<T>(), static_cast<T>(momentum),
                                               static_cast<T>(N) / static_cast<T>(N - 1),
                                               running_mean.data<T>(), running_var.data<T>()});
  });
}

void batch_norm_forward(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                        const Tensor& bias, double eps, Tensor& out, Tensor& rstd) {
  const long long C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("batch_norm rstd", C,
                            RstdFn<T>{var.data<T>(), static_cast<T>(eps), rstd.data<T>()});
    detail::launch_for_each("batch_norm", x.numel(),
                            NormalizeFn<T>{x.data<T>(), mean.data<T>(), rstd.data<T>(),
                                           data_or_null<T>(weight), data_or_null<T>(bias), C, out.data<T>()});
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                         const Tensor& grad_out, bool training, Tensor& grad_x, Tensor* grad_weight,
                         Tensor* grad_bias) {
  const long long N = x.size(0), C = x.size(1);
  dispatch_float(x.dtype(), "batch_norm backward", [&](auto zero) {
    using T = decltype(zero);
    Tensor g_xhat = Tensor::empty({N, C}, x.dtype(), Device::cuda, "batch_norm g * xhat");
    // The column sums go straight into the parameter gradients where those are wanted.
    Tensor sum_g = grad_bias ? *grad_bias : Tensor::empty({C}, x.dtype(), Device::cuda, "batch_norm sum g");
    Tensor sum_g_xhat =
        grad_weight ? *grad_weight : Tensor::empty({C}, x.dtype(), Device::cuda, "batch_norm sum g * xhat");
    detail::launch_for_each(
        "batch_norm g * xhat", N * C,
        GradXhatFn<T>{x.data<T>(), mean.data<T>(), rstd.data<T>(), grad_out.data<T>(), C, g_xhat.data<T>()});
    sum_axis(g_xhat, 1, N, C, sum_g_xhat);
    sum_axis(grad_out, 1, N, C, sum_g);
    detail::launch_for_each(
        "batch_norm backward", N * C,
        GradInputFn<T>{x.data<T>(), mean.data<T>(), rstd.data<T>(), data_or_null<T>(weight),
                       grad_out.data<T>(), sum_g.data<T>(), sum_g_xhat.data<T>(), C, static_cast<T>(N),
                       training, grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
