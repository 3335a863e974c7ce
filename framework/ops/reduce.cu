#include "framework/ops/loops.cuh"
#include "framework/ops/reduce.h"

namespace gat::ops::cuda_impl {

namespace {

constexpr int kSumThreads = 256;  // a power of two: the tree below halves it

// One block per output (grid-stride over outputs): the threads stride along the axis, then a
// shared-memory tree adds their partial sums. The order depends only on kSumThreads, so the
// result is the same on every run.
template <class T>
__global__ void sum_axis_kernel(const T* __restrict__ x,  // (outer, len, inner)
                                T* __restrict__ out,      // (outer, inner)
                                long long outer, long long len, long long inner) {
  __shared__ double partial[kSumThreads];
  for (long long r = blockIdx.x; r < outer * inner; r += gridDim.x) {
    const T* base = x + (r / inner) * len * inner + r % inner;
    double acc = 0.0;
    for (long long l = threadIdx.x; l < len; l += kSumThreads) acc += static_cast<double>(base[l * inner]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kSumThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = static_cast<T>(partial[0]);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

template <class T>
struct ExpandFn {
  const T* g;  // (outer, inner)
  long long len, inner;
  T* out;      // (outer, len, inner)
  __device__ void operator()(long long k) const {
    out[k] = g[k / (len * inner) * inner + k % inner];
  }
};

}  // namespace

void sum_axis(const Tensor& x, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  const long long outputs = outer * inner;
  if (outputs == 0) return;
  dispatch_float(x.dtype(), "sum", [&](auto zero) {
    using T = decltype(zero);
    const unsigned blocks = static_cast<unsigned>(outputs < 65535LL * 32 ? outputs : 65535LL * 32);
    sum_axis_kernel<T><<<blocks, kSumThreads, 0, cuda::stream()>>>(x.data<T>(), out.data<T>(), outer,
                                                                   len, inner);
    CUDA_CHECK_LAUNCH("sum_axis_kernel");
  });
}

void expand_axis(const Tensor& g, int64_t outer, int64_t len, int64_t inner, Tensor& out) {
  dispatch_float(g.dtype(), "sum backward", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("sum backward", outer * len * inner,
                            ExpandFn<T>{g.data<T>(), len, inner, out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
