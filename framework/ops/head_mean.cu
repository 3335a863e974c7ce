#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/head_mean.h"

namespace gat::ops::cuda_impl {

namespace {

// The warps of ops::sum's column tile: its CUDA kernel adds the axis in this many strided
// partial sums, then those in order (reduce.cu's kTileRows).
constexpr int kPartials = 8;

template <class T>
struct HeadMeanFn {
  const T* x;     // (N, H, F)
  const T* bias;  // (F,) or null
  T* out;         // (N, F)
  long long H, F;
  T inv_h;
  template <class I>
  __device__ void operator()(I i) const {
    const I n = i / static_cast<I>(F), f = i - n * static_cast<I>(F);
    const T* column = x + static_cast<long long>(n) * H * F + f;
    double sum = 0.0;
    for (long long k = 0; k < kPartials; ++k) {
      double partial = 0.0;
      for (long long h = k; h < H; h += kPartials) partial += static_cast<double>(column[h * F]);
      sum += partial;
    }
    const T mean = detail::mul_rn(static_cast<T>(sum), inv_h);  // rounded before the bias is added
    out[i] = bias ? mean + bias[f] : mean;
  }
};

template <class T>
struct HeadMeanBackwardFn {
  const T* g;  // (N, F)
  T* dx;       // (N, H, F)
  long long H, F;
  T inv_h;
  template <class I>
  __device__ void operator()(I i) const {
    const I hf = static_cast<I>(H * F);
    dx[i] = g[i / hf * static_cast<I>(F) + i % static_cast<I>(F)] * inv_h;
  }
};

}  // namespace

void head_mean_forward(const Tensor& x, const Tensor* bias, Tensor& out) {
  dispatch_float(x.dtype(), "head_mean", [&](auto zero) {
    using T = decltype(zero);
    const long long H = x.size(1);
    detail::launch_for_each("head_mean", out.numel(),
                            HeadMeanFn<T>{x.data<T>(), bias ? bias->data<T>() : nullptr, out.data<T>(), H,
                                          x.size(2), static_cast<T>(1.0 / static_cast<double>(H))});
  });
}

void head_mean_backward(const Tensor& grad_out, Tensor& grad_x) {
  dispatch_float(grad_out.dtype(), "head_mean backward", [&](auto zero) {
    using T = decltype(zero);
    const long long H = grad_x.size(1);
    detail::launch_for_each("head_mean backward", grad_x.numel(),
                            HeadMeanBackwardFn<T>{grad_out.data<T>(), grad_x.data<T>(), H, grad_x.size(2),
                                                  static_cast<T>(1.0 / static_cast<double>(H))});
  });
}

}  // namespace gat::ops::cuda_impl
