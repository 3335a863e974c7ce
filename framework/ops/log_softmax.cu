#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/detail/row_reduce.cuh"
#include "gat/framework/ops/log_softmax.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kThreads = 256;

template <class T>
__device__ T finish(T v, T lse, bool take_log) {
  return take_log ? v - lse : ::exp(v - lse);
}

// log: dx = G - exp(y) sum G;  softmax: dx = y (G - sum G y)
template <class T>
__device__ T term(T y, T g, bool take_log) {
  return take_log ? g : g * y;
}
template <class T>
__device__ T input_grad(T y, T g, T sum, bool take_log) {
  return take_log ? g - ::exp(y) * sum : y * (g - sum);
}

// ---- contiguous axis (inner = 1): one warp per row of len values, grid-stride over rows ----

template <class T>
__global__ void rows_forward_kernel(const T* __restrict__ inp,  // (rows, len)
                                    T* __restrict__ out,        // (rows, len)
                                    long long rows, long long len, bool take_log) {
  for_each_warp_row(rows, [&](long long r, int lane) {
    const T lse = warp_row_logsumexp(inp + r * len, len, lane);
    for (long long c = lane; c < len; c += kWarp) out[r * len + c] = finish(inp[r * len + c], lse, take_log);
  });
}

template <class T>
__global__ void rows_backward_kernel(const T* __restrict__ out,   // (rows, len)
                                     const T* __restrict__ dout,  // (rows, len)
                                     T* __restrict__ dinp,        // (rows, len)
                                     long long rows, long long len, bool take_log) {
  for_each_warp_row(rows, [&](long long r, int lane) {
    T sum = 0;
    for (long long c = lane; c < len; c += kWarp) sum += term(out[r * len + c], dout[r * len + c], take_log);
    sum = warp_sum(sum);
    for (long long c = lane; c < len; c += kWarp)
      dinp[r * len + c] = input_grad(out[r * len + c], dout[r * len + c], sum, take_log);
  });
}

// ---- strided axis (inner > 1): one thread per (outer, inner) column, walking its len values in
// ascending order (neighbouring threads read neighbouring addresses), grid-stride over columns ----

template <class T>
__global__ void columns_forward_kernel(const T* __restrict__ inp,  // (outer, len, inner)
                                       T* __restrict__ out,        // (outer, len, inner)
                                       long long outer, long long len, long long inner, bool take_log) {
  for (long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x; col < outer * inner;
       col += (long long)gridDim.x * blockDim.x) {
    const long long base = col / inner * len * inner + col % inner;  // element l: base + l * inner
    T max = -INFINITY;
    for (long long l = 0; l < len; ++l) max = ::fmax(max, inp[base + l * inner]);
    T lse = max;  // -inf for a column of -inf, as warp_row_logsumexp
    if (max != -INFINITY) {
      T sum = 0;
      for (long long l = 0; l < len; ++l) sum += ::exp(inp[base + l * inner] - max);
      lse = max + ::log(sum);
    }
    for (long long l = 0; l < len; ++l) out[base + l * inner] = finish(inp[base + l * inner], lse, take_log);
  }
}

template <class T>
__global__ void columns_backward_kernel(const T* __restrict__ out,   // (outer, len, inner)
                                        const T* __restrict__ dout,  // (outer, len, inner)
                                        T* __restrict__ dinp,        // (outer, len, inner)
                                        long long outer, long long len, long long inner, bool take_log) {
  for (long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x; col < outer * inner;
       col += (long long)gridDim.x * blockDim.x) {
    const long long base = col / inner * len * inner + col % inner;
    T sum = 0;
    for (long long l = 0; l < len; ++l) sum += term(out[base + l * inner], dout[base + l * inner], take_log);
    for (long long l = 0; l < len; ++l)
      dinp[base + l * inner] = input_grad(out[base + l * inner], dout[base + l * inner], sum, take_log);
  }
}

}  // namespace

void softmax_forward(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, Tensor& out) {
  if (x.numel() == 0) return;
  dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto zero) {
    using T = decltype(zero);
    if (inner == 1) {
      rows_forward_kernel<T><<<cuda::blocks_for(outer * kWarp, kThreads), kThreads, 0, cuda::stream()>>>(
          x.data<T>(), out.data<T>(), outer, len, log);
      CUDA_CHECK_LAUNCH("softmax rows_forward_kernel");
    } else {
      columns_forward_kernel<T><<<cuda::blocks_for(outer * inner, kThreads), kThreads, 0, cuda::stream()>>>(
          x.data<T>(), out.data<T>(), outer, len, inner, log);
      CUDA_CHECK_LAUNCH("softmax columns_forward_kernel");
    }
  });
}

void softmax_backward(const Tensor& out, const Tensor& grad_out, int64_t outer, int64_t len, int64_t inner,
                      bool log, Tensor& grad_x) {
  if (out.numel() == 0) return;
  dispatch_float(out.dtype(), log ? "log_softmax" : "softmax", [&](auto zero) {
    using T = decltype(zero);
    if (inner == 1) {
      rows_backward_kernel<T><<<cuda::blocks_for(outer * kWarp, kThreads), kThreads, 0, cuda::stream()>>>(
          out.data<T>(), grad_out.data<T>(), grad_x.data<T>(), outer, len, log);
      CUDA_CHECK_LAUNCH("softmax rows_backward_kernel");
    } else {
      columns_backward_kernel<T><<<cuda::blocks_for(outer * inner, kThreads), kThreads, 0, cuda::stream()>>>(
          out.data<T>(), grad_out.data<T>(), grad_x.data<T>(), outer, len, inner, log);
      CUDA_CHECK_LAUNCH("softmax columns_backward_kernel");
    }
  });
}

}  // namespace gat::ops::cuda_impl
