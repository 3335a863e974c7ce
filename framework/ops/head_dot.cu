#include <algorithm>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/head_dot.h"
#include "gat/framework/ops/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
__global__ void head_dot_forward_kernel(const T* __restrict__ x,  // (N, H, F)
                                        const T* __restrict__ a,  // (H, F)
                                        T* __restrict__ out,      // (N, H)
                                        long long NH, int H, int F) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < NH;
       t += (long long)gridDim.x * blockDim.x) {
    const T* xr = x + t * F;
    const T* ar = a + (t % H) * F;
    T acc = 0;
    for (int f = 0; f < F; ++f) acc += xr[f] * ar[f];
    out[t] = acc;
  }
}

// Index type I: 32-bit when the element count allows (the two divisions per element are then a
// third of the 64-bit cost, which held the kernel to 0.6 TB/s at 64M elements).
template <class T, class I>
__global__ void head_dot_grad_x_kernel(const T* __restrict__ a,  // (H, F)
                                       const T* __restrict__ g,  // (N, H)
                                       T* __restrict__ dx,       // (N, H, F)
                                       I n, I HF, I F) {
  for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < n; t += (I)gridDim.x * blockDim.x)
    dx[t] = g[t / F] * a[t % HF];
}

// Stage 1: block b sums rows [b * rows, (b+1) * rows) of g[n,h] * x[n,h,f] in row order.
template <class T>
__global__ void head_dot_grad_a_partial_kernel(const T* __restrict__ x,  // (N, H, F)
                                               const T* __restrict__ g,  // (N, H)
                                               T* __restrict__ partial,  // (blocks, H, F)
                                               long long N, int H, int F, int rows) {
  const int HF = H * F;
  const long long b = blockIdx.x;
  const long long n_end = min(N, (b + 1) * rows);
  for (int c = threadIdx.x; c < HF; c += blockDim.x) {
    const int h = c / F;
    T acc = 0;
    for (long long n = b * rows; n < n_end; ++n) acc += g[n * H + h] * x[n * HF + c];
    partial[b * HF + c] = acc;
  }
}

// Stage 2: d a[c] = sum over blocks b, in order, of partial[b, c]. One thread per column, so
// the loads of kBatch partials are issued together before they are added in order (one load
// at a time, the 4,096 partials of 1M rows took 0.44 ms).
template <class T>
__global__ void head_dot_grad_a_sum_kernel(const T* __restrict__ partial,  // (blocks, H, F)
                                           T* __restrict__ da,             // (H, F)
                                           long long blocks, int HF) {
  constexpr int kBatch = 16;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < HF; c += gridDim.x * blockDim.x) {
    T acc = 0;
    long long b = 0;
    for (; b + kBatch <= blocks; b += kBatch) {
      T p[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) p[u] = partial[(b + u) * HF + c];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) acc += p[u];
    }
    for (; b < blocks; ++b) acc += partial[b * HF + c];
    da[c] = acc;
  }
}

// Elements [4 block, 4 block + 4) of head_dot_pair_grad_x, the keep decisions from one draw
// (as DropoutFn draws them). I indexes elements: 32-bit when their count allows (loops.cuh).
template <class T, class I>
struct PairGradX {
  const T* base;  // (N, H, F)
  const T* a1;    // (H, F)
  const T* g1;    // (N, H)
  const T* a2;    // (H, F)
  const T* g2;    // (N, H)
  T* dx;          // (N, H, F), may be base
  I n, HF, F;
  DropoutKey key;
  T keep_scale;
  template <class B>
  __device__ void operator()(B block) const {
    const unsigned kept = key.active() ? key.keep4(static_cast<uint64_t>(block)) : 0xFu;
    const I first = static_cast<I>(block) * 4;
    for (I k = 0, i = first; k < 4 && i < n; ++k, ++i) {
      const I t = i / F, c = i % HF;
      dx[i] = DropoutKey::apply_kept(base[i], (kept >> k) & 1u, keep_scale) + g1[t] * a1[c] + g2[t] * a2[c];
    }
  }
};

}  // namespace

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask&,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  const long long n = grad_x.numel(), F = base.size(2), HF = base.size(1) * F;
  dispatch_float(base.dtype(), "head_dot_pair_grad_x", [&](auto zero) {
    using T = decltype(zero);
    auto launch = [&](auto index) {
      using I = decltype(index);
      detail::launch_for_each("head_dot_pair_grad_x", (n + 3) / 4,
                              PairGradX<T, I>{base.data<T>(), a1.data<T>(), g1.data<T>(), a2.data<T>(),
                                              g2.data<T>(), grad_x.data<T>(), static_cast<I>(n),
                                              static_cast<I>(HF), static_cast<I>(F), key,
                                              static_cast<T>(key.active() ? keep_scale : 1.0)});
    };
    if (n < (1LL << 31)) launch(uint32_t{});
    else launch(uint64_t{});
  });
}

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  const long long NH = out.numel();
  if (NH == 0) return;
  const int H = static_cast<int>(x.size(1)), F = static_cast<int>(x.size(2));
  dispatch_float(x.dtype(), "head_dot", [&](auto zero) {
    using T = decltype(zero);
    head_dot_forward_kernel<T><<<cuda::blocks_for(NH), 256, 0, cuda::stream()>>>(
        x.data<T>(), a.data<T>(), out.data<T>(), NH, H, F);
    CUDA_CHECK_LAUNCH("head_dot_forward_kernel");
  });
}

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  const long long N = x.size(0);
  const int H = static_cast<int>(x.size(1)), F = static_cast<int>(x.size(2)), HF = H * F;
  dispatch_float(x.dtype(), "head_dot backward", [&](auto zero) {
    using T = decltype(zero);
    if (grad_x && grad_x->numel() > 0) {
      const long long n = grad_x->numel();
      auto launch = [&](auto index) {
        using I = decltype(index);
        head_dot_grad_x_kernel<T, I><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(
            a.data<T>(), grad_out.data<T>(), grad_x->data<T>(), static_cast<I>(n),
            static_cast<I>(HF), static_cast<I>(F));
      };
      if (n < (1LL << 31)) launch(uint32_t{});  // (t + grid stride stays below 2^32)
      else launch(uint64_t{});
      CUDA_CHECK_LAUNCH("head_dot_grad_x_kernel");
    }
    if (grad_a && HF > 0) {
      const long long rows = head_dot_detail::rows_per_block(N);
      const long long blocks = (N + rows - 1) / rows;
      if (blocks == 0) {
        grad_a->zero_();
        return;
      }
      Tensor partial = Tensor::empty({blocks, H, F}, x.dtype(), Device::cuda, "head_dot partial d a");
      const unsigned threads = static_cast<unsigned>(std::min(256, (HF + 31) / 32 * 32));
      head_dot_grad_a_partial_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, cuda::stream()>>>(
          x.data<T>(), grad_out.data<T>(), partial.data<T>(), N, H, F, static_cast<int>(rows));
      CUDA_CHECK_LAUNCH("head_dot_grad_a_partial_kernel");
      head_dot_grad_a_sum_kernel<T><<<cuda::blocks_for(HF), 256, 0, cuda::stream()>>>(
          partial.data<T>(), grad_a->data<T>(), blocks, HF);
      CUDA_CHECK_LAUNCH("head_dot_grad_a_sum_kernel");
    }
  });
}

}  // namespace gat::ops::cuda_impl
