#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/gat_edge_scores.h"
#include "gat/framework/ops/graph_kernels.cuh"

namespace gat::ops::cuda_impl {

namespace {

using warps::kWarp;

template <class T>
__device__ __forceinline__ T leaky_relu(T x, T slope) { return x > T(0) ? x : slope * x; }

// One thread per (edge, head) t = e * H + h; e by a shift when H is a power of two (a 64-bit
// division per element held the kernel to a third of the memory bandwidth at 16M edges).
template <class T>
__global__ void edge_scores_forward_kernel(const int32_t* __restrict__ src,  // (E,)
                                           const int32_t* __restrict__ dst,  // (E,)
                                           const T* __restrict__ el,         // (N, H)
                                           const T* __restrict__ er,         // (N, H)
                                           T* __restrict__ scores,           // (E, H)
                                           long long EH, int H, int log2_H, T slope) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < EH;
       t += (long long)gridDim.x * blockDim.x) {
    const long long e = log2_H >= 0 ? t >> log2_H : t / H;
    const int h = static_cast<int>(t - e * H);
    scores[t] = leaky_relu(el[(long long)src[e] * H + h] + er[(long long)dst[e] * H + h], slope);
  }
}

// A warp per (node, block of heads) (warps::HeadLanes: all the node's heads at once when H
// divides 32, so the (edge, head) gradients are read contiguously):
// d[n,h] = sum over the node's list k in [ptr[n], ptr[n+1]) of g = ds[e,h] * LeakyReLU'(el[j,h] +
// er[i,h]). For CSR rows (n = i): e = k, j = other[k]. For the transpose (n = j): e = edge_id[k],
// i = other[k]. Each lane sums its entries in list order, then a fixed butterfly: reproducible.
template <class T, bool kTransposed>
__global__ void edge_scores_backward_kernel(const int32_t* __restrict__ ptr,      // (N+1,)
                                            const int32_t* __restrict__ other,    // (E,)
                                            const int32_t* __restrict__ edge_id,  // (E,) or null
                                            const T* __restrict__ el,             // (N, H)
                                            const T* __restrict__ er,             // (N, H)
                                            const T* __restrict__ grad_scores,    // (E, H)
                                            T* __restrict__ grad,                 // (N, H)
                                            long long N, int H, T slope) {
  const warps::HeadLanes heads(H, threadIdx.x % kWarp);
  for (long long w = warps::warp_id(); w < N * heads.blocks; w += warps::warp_count()) {
    long long n;
    int h;
    heads.item(w, n, h);
    const T own = kTransposed ? el[n * H + h] : er[n * H + h];
    T acc = 0;
#pragma unroll 4
    for (long long k = ptr[n] + heads.first; k < ptr[n + 1]; k += heads.stride) {
      const long long e = kTransposed ? edge_id[k] : k;
      const T x = own + (kTransposed ? er : el)[(long long)other[k] * H + h];
      const T g = grad_scores[e * H + h];
      acc += x > T(0) ? g : slope * g;
    }
    acc = heads.sum(acc);
    if (heads.first == 0) grad[n * H + h] = acc;
  }
}

}  // namespace

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er,
                             double negative_slope, Tensor& scores) {
  const long long EH = scores.numel();
  if (EH == 0) return;
  const int H = static_cast<int>(el.size(1));
  dispatch_float(el.dtype(), "gat_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    edge_scores_forward_kernel<T><<<cuda::blocks_for(EH), 256, 0, cuda::stream()>>>(
        graph.edge_src().data<int32_t>(), graph.edge_dst().data<int32_t>(), el.data<T>(),
        er.data<T>(), scores.data<T>(), EH, H, (H & (H - 1)) == 0 ? __builtin_ctz(H) : -1,
        static_cast<T>(negative_slope));
    CUDA_CHECK_LAUNCH("edge_scores_forward_kernel");
  });
}

void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er) {
  const long long N = el.size(0);
  const int H = static_cast<int>(el.size(1));
  if (N * H == 0) return;
  const unsigned blocks = warps::warp_blocks(N * warps::HeadLanes(H).blocks);
  dispatch_float(el.dtype(), "gat_edge_scores backward", [&](auto zero) {
    using T = decltype(zero);
    const T slope = static_cast<T>(negative_slope);
    if (grad_er) {
      edge_scores_backward_kernel<T, false><<<blocks, 256, 0, cuda::stream()>>>(
          graph.row_ptr().data<int32_t>(), graph.edge_src().data<int32_t>(), nullptr,
          el.data<T>(), er.data<T>(), grad_scores.data<T>(), grad_er->data<T>(), N, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d er)");
    }
    if (grad_el) {
      edge_scores_backward_kernel<T, true><<<blocks, 256, 0, cuda::stream()>>>(
          graph.t_row_ptr().data<int32_t>(), graph.t_edge_dst().data<int32_t>(),
          graph.t_edge_id().data<int32_t>(), el.data<T>(), er.data<T>(), grad_scores.data<T>(),
          grad_el->data<T>(), N, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d el)");
    }
  });
}

}  // namespace gat::ops::cuda_impl
