#include "framework/cuda_check.h"
#include "framework/ops/gat_edge_scores.h"
#include "framework/ops/graph_kernels.cuh"

namespace gat::ops::cuda_impl {

namespace {

using graph::kWarp;

template <class T>
__device__ __forceinline__ T leaky_relu(T x, T slope) { return x > T(0) ? x : slope * x; }

// One thread per (edge, head).
template <class T>
__global__ void edge_scores_forward_kernel(const int32_t* __restrict__ src,  // (E,)
                                           const int32_t* __restrict__ dst,  // (E,)
                                           const T* __restrict__ el,         // (N, H)
                                           const T* __restrict__ er,         // (N, H)
                                           T* __restrict__ scores,           // (E, H)
                                           long long EH, int H, T slope) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < EH;
       t += (long long)gridDim.x * blockDim.x) {
    const long long e = t / H;
    const int h = static_cast<int>(t - e * H);
    scores[t] = leaky_relu(el[(long long)src[e] * H + h] + er[(long long)dst[e] * H + h], slope);
  }
}

// One warp per (node, head): d[n,h] = sum over the node's list k in [ptr[n], ptr[n+1]) of
// g = ds[e,h] * LeakyReLU'(el[j,h] + er[i,h]). For CSR rows (n = i): e = k, j = other[k]. For
// the transpose (n = j): e = edge_id[k], i = other[k]. Lanes stride over the list, then a fixed
// butterfly: reproducible.
template <class T, bool kTransposed>
__global__ void edge_scores_backward_kernel(const int32_t* __restrict__ ptr,      // (N+1,)
                                            const int32_t* __restrict__ other,    // (E,)
                                            const int32_t* __restrict__ edge_id,  // (E,) or null
                                            const T* __restrict__ el,             // (N, H)
                                            const T* __restrict__ er,             // (N, H)
                                            const T* __restrict__ grad_scores,    // (E, H)
                                            T* __restrict__ grad,                 // (N, H)
                                            long long NH, int H, T slope) {
  const int lane = threadIdx.x % kWarp;
  for (long long w = graph::warp_id(); w < NH; w += graph::warp_count()) {
    const long long n = w / H;
    const int h = static_cast<int>(w - n * H);
    T acc = 0;
    for (long long k = ptr[n] + lane; k < ptr[n + 1]; k += kWarp) {
      const long long e = kTransposed ? edge_id[k] : k;
      const long long j = kTransposed ? n : other[k];
      const long long i = kTransposed ? other[k] : n;
      const T x = el[j * H + h] + er[i * H + h];
      const T g = grad_scores[e * H + h];
      acc += x > T(0) ? g : slope * g;
    }
    acc = graph::group_sum<kWarp>(acc);
    if (lane == 0) grad[w] = acc;
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
        graph.col_idx().data<int32_t>(), graph.edge_dst().data<int32_t>(), el.data<T>(),
        er.data<T>(), scores.data<T>(), EH, H, static_cast<T>(negative_slope));
    CUDA_CHECK_LAUNCH("edge_scores_forward_kernel");
  });
}

void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er) {
  const long long NH = el.numel();
  if (NH == 0) return;
  const int H = static_cast<int>(el.size(1));
  dispatch_float(el.dtype(), "gat_edge_scores backward", [&](auto zero) {
    using T = decltype(zero);
    const T slope = static_cast<T>(negative_slope);
    if (grad_er) {
      edge_scores_backward_kernel<T, false><<<graph::warp_blocks(NH), 256, 0, cuda::stream()>>>(
          graph.row_ptr().data<int32_t>(), graph.col_idx().data<int32_t>(), nullptr,
          el.data<T>(), er.data<T>(), grad_scores.data<T>(), grad_er->data<T>(), NH, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d er)");
    }
    if (grad_el) {
      edge_scores_backward_kernel<T, true><<<graph::warp_blocks(NH), 256, 0, cuda::stream()>>>(
          graph.t_row_ptr().data<int32_t>(), graph.t_col_idx().data<int32_t>(),
          graph.t_edge_id().data<int32_t>(), el.data<T>(), er.data<T>(), grad_scores.data<T>(),
          grad_el->data<T>(), NH, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d el)");
    }
  });
}

}  // namespace gat::ops::cuda_impl
