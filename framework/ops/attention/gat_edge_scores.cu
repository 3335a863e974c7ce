#include "gat/framework/cuda_check.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/detail/graph_kernels.cuh"

namespace gat::ops::cuda_impl {

namespace {

using warps::kWarp;

template <class T>
__device__ __forceinline__ T leaky_relu(T x, T slope) {
  return x > T(0) ? x : slope * x;
}

// x[e,h] = el[src(e),h] + er[dst(e),h] (+ term[e,h]), the LeakyReLU's argument, for t = e * H + h.
template <class T>
struct ScoreArgument {
  const int32_t* __restrict__ src;  // (E,)
  const int32_t* __restrict__ dst;  // (E,)
  const T* __restrict__ el;         // (Ns, H)
  const T* __restrict__ er;         // (Nd, H)
  const T* __restrict__ term;       // (E, H) or null
  int H, log2_H;                    // log2_H: -1 unless H is a power of two
  __device__ __forceinline__ T operator()(long long t) const {
    // e by a shift when H is a power of two (a 64-bit division per element held the kernel to a
    // third of the memory bandwidth at 16M edges).
    const long long e = log2_H >= 0 ? t >> log2_H : t / H;
    const int h = static_cast<int>(t - e * H);
    const T x = el[(long long)src[e] * H + h] + er[(long long)dst[e] * H + h];
    return term ? x + term[t] : x;
  }
};

// One thread per (edge, head) t = e * H + h: scores[t] = LeakyReLU(x[t]).
template <class T>
__global__ void edge_scores_forward_kernel(ScoreArgument<T> x,
                                           T* __restrict__ scores,  // (E, H)
                                           long long EH, T slope) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < EH;
       t += (long long)gridDim.x * blockDim.x)
    scores[t] = leaky_relu(x(t), slope);
}

// One thread per (edge, head) t: d term[t] = ds[t] * LeakyReLU'(x[t]).
template <class T>
__global__ void edge_term_backward_kernel(ScoreArgument<T> x,
                                          const T* __restrict__ grad_scores,  // (E, H)
                                          T* __restrict__ grad_term,          // (E, H)
                                          long long EH, T slope) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < EH;
       t += (long long)gridDim.x * blockDim.x)
    grad_term[t] = x(t) > T(0) ? grad_scores[t] : slope * grad_scores[t];
}

// A warp per (node, block of heads) (warps::HeadLanes: all the node's heads at once when H
// divides 32, so the (edge, head) gradients are read contiguously):
// d[n,h] = sum over the node's list k in [ptr[n], ptr[n+1]) of g = ds[e,h] * LeakyReLU'(el[j,h] +
// er[i,h] (+ term[e,h])). For CSR rows (n = i): e = k, j = other[k]. For the transpose (n = j):
// e = edge_id[k], i = other[k]. Each lane sums its entries in list order, then a fixed butterfly:
// reproducible.
template <class T, bool kTransposed>
__global__ void edge_scores_backward_kernel(const int32_t* __restrict__ ptr,      // (N+1,)
                                            const int32_t* __restrict__ other,    // (E,)
                                            const int32_t* __restrict__ edge_id,  // (E,) or null
                                            const T* __restrict__ el,             // (Ns, H)
                                            const T* __restrict__ er,             // (Nd, H)
                                            const T* __restrict__ term,           // (E, H) or null
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
      T x = own + (kTransposed ? er : el)[(long long)other[k] * H + h];
      if (term) x += term[e * H + h];
      const T g = grad_scores[e * H + h];
      acc += x > T(0) ? g : slope * g;
    }
    acc = heads.sum(acc);
    if (heads.first == 0) grad[n * H + h] = acc;
  }
}

}  // namespace

template <class T>
ScoreArgument<T> score_argument(const Graph& graph, const Tensor& el, const Tensor& er,
                                const Tensor& edge_term) {
  const int H = static_cast<int>(el.size(1));
  return {graph.edge_src().data<int32_t>(),
          graph.edge_dst().data<int32_t>(),
          el.data<T>(),
          er.data<T>(),
          edge_term.defined() ? edge_term.data<T>() : nullptr,
          H,
          (H & (H - 1)) == 0 ? __builtin_ctz(H) : -1};
}

void gat_edge_scores_forward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                             double negative_slope, Tensor& scores) {
  const long long EH = scores.numel();
  if (EH == 0) return;
  dispatch_float(el.dtype(), "gat_edge_scores", [&](auto zero) {
    using T = decltype(zero);
    edge_scores_forward_kernel<T><<<cuda::blocks_for(EH), 256, 0, cuda::stream()>>>(
        score_argument<T>(graph, el, er, edge_term), scores.data<T>(), EH, static_cast<T>(negative_slope));
    CUDA_CHECK_LAUNCH("edge_scores_forward_kernel");
  });
}

void gat_edge_scores_backward(const Graph& graph, const Tensor& el, const Tensor& er, const Tensor& edge_term,
                              double negative_slope, const Tensor& grad_scores, Tensor* grad_el,
                              Tensor* grad_er, Tensor* grad_edge_term) {
  const int H = static_cast<int>(el.size(1));
  const long long EH = graph.num_edges() * H;
  if (EH == 0) {  // no edge: nothing reaches el or er
    for (Tensor* grad : {grad_el, grad_er})
      if (grad) grad->zero_();
    return;
  }
  const warps::HeadLanes heads(H);
  dispatch_float(el.dtype(), "gat_edge_scores backward", [&](auto zero) {
    using T = decltype(zero);
    const T slope = static_cast<T>(negative_slope);
    const T* term = edge_term.defined() ? edge_term.data<T>() : nullptr;
    if (grad_er) {
      const long long Nd = graph.num_dst_nodes();
      edge_scores_backward_kernel<T, false>
          <<<warps::warp_blocks(Nd * heads.blocks), 256, 0, cuda::stream()>>>(
              graph.row_ptr().data<int32_t>(), graph.edge_src().data<int32_t>(), nullptr, el.data<T>(),
              er.data<T>(), term, grad_scores.data<T>(), grad_er->data<T>(), Nd, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d er)");
    }
    if (grad_el) {
      const long long Ns = graph.num_src_nodes();
      edge_scores_backward_kernel<T, true><<<warps::warp_blocks(Ns * heads.blocks), 256, 0, cuda::stream()>>>(
          graph.t_row_ptr().data<int32_t>(), graph.t_edge_dst().data<int32_t>(),
          graph.t_edge_id().data<int32_t>(), el.data<T>(), er.data<T>(), term, grad_scores.data<T>(),
          grad_el->data<T>(), Ns, H, slope);
      CUDA_CHECK_LAUNCH("edge_scores_backward_kernel (d el)");
    }
    if (grad_edge_term) {
      edge_term_backward_kernel<T><<<cuda::blocks_for(EH), 256, 0, cuda::stream()>>>(
          score_argument<T>(graph, el, er, edge_term), grad_scores.data<T>(), grad_edge_term->data<T>(), EH,
          slope);
      CUDA_CHECK_LAUNCH("edge_term_backward_kernel");
    }
  });
}

}  // namespace gat::ops::cuda_impl
