#include <algorithm>

#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/detail/affine_norm.h"
#include "gat/framework/ops/detail/loops.cuh"
#include "gat/framework/ops/detail/row_reduce.cuh"
#include "gat/framework/ops/layer_norm.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kWarpsPerBlock = 8;

// Blocks for one warp per row, the warps striding over the rows beyond the grid.
unsigned row_blocks(long long rows) {
  const long long blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::max(1LL, std::min(blocks, cuda::kMaxGridBlocks)));
}

// One warp per row: the lanes stride the row's D elements and combine their double partial sums
// with warp_sum (a fixed order), so every lane holds the row's mean and rstd.
template <class T>
__global__ void layer_norm_forward_kernel(const T* __restrict__ x,       // (R, D)
                                          const T* __restrict__ weight,  // (D,) or null
                                          const T* __restrict__ bias,    // (D,) or null
                                          long long R, long long D, double eps,
                                          T* __restrict__ out,     // (R, D)
                                          T* __restrict__ mean,    // (R,)
                                          T* __restrict__ rstd) {  // (R,)
  const int lane = threadIdx.x % kWarp;
  const long long warps = static_cast<long long>(gridDim.x) * kWarpsPerBlock;
  for (long long r = blockIdx.x * static_cast<long long>(kWarpsPerBlock) + threadIdx.x / kWarp; r < R;
       r += warps) {
    const T* row = x + r * D;
    double sum = 0.0;
    for (long long d = lane; d < D; d += kWarp) sum += static_cast<double>(row[d]);
    const T m = static_cast<T>(warp_sum(sum) / static_cast<double>(D));
    double squares = 0.0;
    for (long long d = lane; d < D; d += kWarp) {
      const double centred = static_cast<double>(row[d] - m);
      squares += detail::mul_rn(centred, centred);
    }
    const T s = static_cast<T>(1.0 / sqrt(warp_sum(squares) / static_cast<double>(D) + eps));
    if (lane == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
    for (long long d = lane; d < D; d += kWarp) {
      const T xhat = (row[d] - m) * s;
      out[r * D + d] = (weight ? detail::mul_rn(xhat, weight[d]) : xhat) + (bias ? bias[d] : T(0));
    }
  }
}

// d x, one warp per row (see layer_norm.h).
template <class T>
__global__ void layer_norm_backward_kernel(const T* __restrict__ x,       // (R, D)
                                           const T* __restrict__ weight,  // (D,) or null
                                           const T* __restrict__ mean,    // (R,)
                                           const T* __restrict__ rstd,    // (R,)
                                           const T* __restrict__ g,       // (R, D)
                                           long long R, long long D,
                                           T* __restrict__ grad_x) {  // (R, D)
  const int lane = threadIdx.x % kWarp;
  const long long warps = static_cast<long long>(gridDim.x) * kWarpsPerBlock;
  for (long long r = blockIdx.x * static_cast<long long>(kWarpsPerBlock) + threadIdx.x / kWarp; r < R;
       r += warps) {
    const T* row = x + r * D;
    const T* grow = g + r * D;
    const T m = mean[r], s = rstd[r];
    double sum_gw = 0.0, sum_gw_xhat = 0.0;
    for (long long d = lane; d < D; d += kWarp) {
      const T gw = weight ? detail::mul_rn(grow[d], weight[d]) : grow[d];
      sum_gw += static_cast<double>(gw);
      sum_gw_xhat += static_cast<double>(detail::mul_rn(gw, (row[d] - m) * s));
    }
    const T mean_gw = static_cast<T>(warp_sum(sum_gw) / static_cast<double>(D));
    const T mean_gw_xhat = static_cast<T>(warp_sum(sum_gw_xhat) / static_cast<double>(D));
    for (long long d = lane; d < D; d += kWarp) {
      const T gw = weight ? detail::mul_rn(grow[d], weight[d]) : grow[d];
      grad_x[r * D + d] = s * (gw - mean_gw - detail::mul_rn((row[d] - m) * s, mean_gw_xhat));
    }
  }
}

// g * xhat, elementwise over (R, D): the terms of d weight.
template <class T>
struct GradXhatFn {
  const T* x;     // (R, D)
  const T* mean;  // (R,)
  const T* rstd;  // (R,)
  const T* g;     // (R, D)
  long long D;
  T* out;  // (R, D)
  template <class I>
  __device__ void operator()(I i) const {
    const I r = i / static_cast<I>(D);
    out[i] = g[i] * ((x[i] - mean[r]) * rstd[r]);
  }
};

using ops::detail::data_or_null;

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Tensor& out,
                        Tensor& mean, Tensor& rstd) {
  const long long D = x.size(-1), R = x.numel() / D;
  if (R == 0) return;
  dispatch_float(x.dtype(), "layer_norm", [&](auto zero) {
    using T = decltype(zero);
    layer_norm_forward_kernel<T><<<row_blocks(R), kWarpsPerBlock * kWarp, 0, cuda::stream()>>>(
        x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), R, D, eps, out.data<T>(), mean.data<T>(),
        rstd.data<T>());
    CUDA_CHECK_LAUNCH("layer_norm_forward_kernel");
  });
}

void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& grad_out, Tensor& grad_x, Tensor* grad_weight, Tensor* grad_bias) {
  const long long D = x.size(-1), R = x.numel() / D;
  dispatch_float(x.dtype(), "layer_norm backward", [&](auto zero) {
    using T = decltype(zero);
    if (R > 0) {
      layer_norm_backward_kernel<T><<<row_blocks(R), kWarpsPerBlock * kWarp, 0, cuda::stream()>>>(
          x.data<T>(), data_or_null<T>(weight), mean.data<T>(), rstd.data<T>(), grad_out.data<T>(), R, D,
          grad_x.data<T>());
      CUDA_CHECK_LAUNCH("layer_norm_backward_kernel");
    }
    // The parameter gradients are column sums over the rows (reduce.cu's deterministic sum).
    if (grad_weight) {
      Tensor g_xhat = Tensor::empty({R, D}, x.dtype(), Device::cuda, "layer_norm g * xhat");
      detail::launch_for_each("layer_norm d weight", R * D,
                              GradXhatFn<T>{x.data<T>(), mean.data<T>(), rstd.data<T>(), grad_out.data<T>(),
                                            D, g_xhat.data<T>()});
      sum_axis(g_xhat, 1, R, D, *grad_weight);
    }
    if (grad_bias) sum_axis(grad_out, 1, R, D, *grad_bias);
  });
}

}  // namespace gat::ops::cuda_impl
