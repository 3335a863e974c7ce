#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/log_softmax.h"
#include "gat/framework/ops/row_reduce.cuh"

namespace gat::ops::cuda_impl {

namespace {

// One warp per row; 256-thread blocks (8 rows per block), grid-stride over rows.
template <class T>
__global__ void log_softmax_forward_kernel(const T* __restrict__ inp,  // (N, C)
                                           T* __restrict__ out,        // (N, C)
                                           long long N, long long C) {
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)gridDim.x * (blockDim.x / kWarp);
  for (long long r = blockIdx.x * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp; r < N; r += warps) {
    const T lse = warp_row_logsumexp(inp + r * C, C, lane);
    for (long long c = lane; c < C; c += kWarp) out[r * C + c] = inp[r * C + c] - lse;
  }
}

template <class T>
__global__ void log_softmax_backward_kernel(const T* __restrict__ out,   // (N, C)
                                            const T* __restrict__ dout,  // (N, C)
                                            T* __restrict__ dinp,        // (N, C)
                                            long long N, long long C) {
  const int lane = threadIdx.x % kWarp;
  const long long warps = (long long)gridDim.x * (blockDim.x / kWarp);
  for (long long r = blockIdx.x * (long long)(blockDim.x / kWarp) + threadIdx.x / kWarp; r < N; r += warps) {
    T sum = 0;
    for (long long c = lane; c < C; c += kWarp) sum += dout[r * C + c];
    sum = warp_sum(sum);
    for (long long c = lane; c < C; c += kWarp) dinp[r * C + c] = dout[r * C + c] - exp(out[r * C + c]) * sum;
  }
}

}  // namespace

void log_softmax_forward(const Tensor& x, Tensor& out) {
  const long long N = x.size(0), C = x.size(1);
  if (N * C == 0) return;
  dispatch_float(x.dtype(), "log_softmax", [&](auto zero) {
    using T = decltype(zero);
    log_softmax_forward_kernel<T><<<cuda::blocks_for(N * kWarp), 256, 0, cuda::stream()>>>(
        x.data<T>(), out.data<T>(), N, C);
    CUDA_CHECK_LAUNCH("log_softmax_forward_kernel");
  });
}

void log_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_x) {
  const long long N = out.size(0), C = out.size(1);
  if (N * C == 0) return;
  dispatch_float(out.dtype(), "log_softmax", [&](auto zero) {
    using T = decltype(zero);
    log_softmax_backward_kernel<T><<<cuda::blocks_for(N * kWarp), 256, 0, cuda::stream()>>>(
        out.data<T>(), grad_out.data<T>(), grad_x.data<T>(), N, C);
    CUDA_CHECK_LAUNCH("log_softmax_backward_kernel");
  });
}

}  // namespace gat::ops::cuda_impl
