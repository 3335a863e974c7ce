#include <algorithm>
#include <type_traits>

#include "gat/framework/cuda_check.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/attention/detail/attention_kernels.cuh"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// S is the dtype of x and of the (N, ...) tensors beside it, f32, f64 or bf16 (bf16 rows read and
// written by the attention kernels' load_row and store_row); T = Compute<S> that of the
// arithmetic, the parameters a1, a2 and their gradients (f32 beside bf16 rows: master weights).
// O is the dtype of the dots (N, H) and of their gradients: S (head_dot), or T beside bf16 rows
// (gat_projected_attention's el and er, per-node statistics kept in f32). For f32 and f64 S, T
// and O are one type and these kernels are the code they were.
using attention::Compute;
using attention::load_row;
using attention::narrow;
using attention::store_row;
using attention::widen;

// What the paired forward writes besides the dots (head_dot_pair_dropout_forward): the values
// dropout(x) and the packed rows [values | out1] (out1 in its own dtype), each null when not asked.
template <class S, class T = Compute<S>>
struct ValueRows {
  S* values = nullptr;  // (N, H, F)
  DropoutKey key;
  T keep_scale = 1;
  S* rows = nullptr;  // (N, row_len)
  int row_len = 0;
};

// One or two head_dots of the same x (a2 and out2 null for one): a thread per (n, h), x read
// once, and the values and rows of `vr` from the same reads, VEC values a load or store (16-byte
// vectors where F and the pointers allow: one float at a time, the stores of the values and rows
// of 5M one-head rows of 8 took 0.94 ms). Each dot adds its F terms in order, whatever VEC. The
// keep decision of flat element i is bit i & 3 of the draw for block i >> 2, as DropoutFn's (a
// thread draws each block it touches, a block shared by two heads twice).
template <class S, int VEC, class O = S>
__global__ void head_dot_forward_kernel(const S* __restrict__ x,            // (N, H, F)
                                        const Compute<S>* __restrict__ a1,  // (H, F)
                                        O* __restrict__ out1,               // (N, H)
                                        const Compute<S>* __restrict__ a2,  // (H, F) or null
                                        O* __restrict__ out2,               // (N, H) or null
                                        long long NH, int H, int F, ValueRows<S> vr) {
  using T = Compute<S>;
  const DropoutKey key = vr.key.resolved();
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < NH;
       t += (long long)gridDim.x * blockDim.x) {
    const S* xr = x + t * F;
    const long long n = t / H;
    const int h = static_cast<int>(t - n * H);
    const long long ah = static_cast<long long>(h) * F;
    S* row = vr.rows ? vr.rows + n * vr.row_len : nullptr;
    T acc1 = 0, acc2 = 0;
    long long drawn = -1;  // the block whose decisions `kept` holds
    unsigned kept = 0xFu;
    for (int f = 0; f < F; f += VEC) {
      const detail::Vec<T, VEC> in = load_row<S, VEC>(xr + f);
      detail::Vec<T, VEC> value = in;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const T xf = in.v[k];
        acc1 += xf * a1[ah + f + k];
        if (a2) acc2 += xf * a2[ah + f + k];
        if (vr.values) {
          const long long i = t * F + f + k;
          if (i >> 2 != drawn) {
            drawn = i >> 2;
            kept = key.active() ? key.keep4(static_cast<uint64_t>(drawn)) : 0xFu;
          }
          value.v[k] = DropoutKey::apply_kept(xf, (kept >> (i & 3)) & 1u, vr.keep_scale);
        }
      }
      if (vr.values) store_row<S, VEC>(vr.values + t * F + f, value);
      if (row) store_row<S, VEC>(row + ah + f, value);
    }
    out1[t] = narrow<O>(acc1);
    if (a2) out2[t] = narrow<O>(acc2);
    // el after the values, in O (f32 after bf16 values: packs_source_row).
    if (row) reinterpret_cast<O*>(row + static_cast<long long>(H) * F)[h] = narrow<O>(acc1);
  }
}

// Index type I: 32-bit when the element count allows (the two divisions per element are then a
// third of the 64-bit cost, which held the kernel to 0.6 TB/s at 64M elements).
template <class S, class I>
__global__ void head_dot_grad_x_kernel(const Compute<S>* __restrict__ a,  // (H, F)
                                       const S* __restrict__ g,           // (N, H)
                                       S* __restrict__ dx,                // (N, H, F)
                                       I n, I HF, I F) {
  for (I t = blockIdx.x * (I)blockDim.x + threadIdx.x; t < n; t += (I)gridDim.x * blockDim.x)
    dx[t] = narrow<S>(widen(g[t / F]) * a[t % HF]);
}

// Stage 1: block b sums rows [b * rows, (b+1) * rows) of g1[n,h] * x[n,h,f] in row order, and
// with g2 (else null) of g2[n,h] * x[n,h,f]: partial (2, blocks, H, F), the second half for g2.
// A batch's 32 rows' loads are issued before their multiply-adds (in row order): a thread waits a
// memory latency per batch (1,221 rows a block at 5M nodes, H F = 8: one row at a time 0.16 ms,
// batches of 8 rows 0.18 ms, of 32 rows 0.15 ms; the block's 8 busy lanes bound it).
template <class S, class O = S>
__global__ void head_dot_grad_a_partial_kernel(const S* __restrict__ x,           // (N, H, F)
                                               const O* __restrict__ g1,          // (N, H)
                                               const O* __restrict__ g2,          // (N, H) or null
                                               Compute<S>* __restrict__ partial,  // (1 or 2, blocks, H, F)
                                               long long N, int H, int F, int rows, long long blocks) {
  using T = Compute<S>;
  const int HF = H * F;
  const long long b = blockIdx.x;
  const long long n_end = min(N, (b + 1) * rows);
  for (int c = threadIdx.x; c < HF; c += blockDim.x) {
    const int h = c / F;
    T acc1 = 0, acc2 = 0;
    auto add = [&](T xc, T w1, T w2) {
      acc1 += w1 * xc;
      if (g2) acc2 += w2 * xc;
    };
    constexpr int kBatch = 32;
    long long n = b * rows;
    for (; n + kBatch <= n_end; n += kBatch) {
      T xs[kBatch], w1[kBatch], w2[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        xs[u] = widen(x[(n + u) * HF + c]);
        w1[u] = widen(g1[(n + u) * H + h]);
        w2[u] = g2 ? widen(g2[(n + u) * H + h]) : T(0);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) add(xs[u], w1[u], w2[u]);
    }
    for (; n < n_end; ++n) add(widen(x[n * HF + c]), widen(g1[n * H + h]), g2 ? widen(g2[n * H + h]) : T(0));
    partial[b * HF + c] = acc1;
    if (g2) partial[(blocks + b) * HF + c] = acc2;
  }
}

// Elements [4 block, 4 block + 4) of head_dot_pair_grad_x, the keep decisions from one draw
// (as DropoutFn draws them). I indexes elements: 32-bit when their count allows (loops.cuh).
// base and dx are rows S; the parameters and the dots' gradients T = Compute<S> (f32 beside bf16
// rows: base widened, the sum in f32, rounded once at the store).
template <class S, class I, class T = Compute<S>>
struct PairGradX {
  const S* base;  // (N, H, F)
  const T* a1;    // (H, F)
  const T* g1;    // (N, H)
  const T* a2;    // (H, F)
  const T* g2;    // (N, H)
  S* dx;          // (N, H, F), may be base
  I n, HF, F;
  DropoutKey key;
  T keep_scale;
  template <class B>
  __device__ void operator()(B block) const {
    const unsigned kept = key.active() ? key.keep4(static_cast<uint64_t>(block)) : 0xFu;
    const I first = static_cast<I>(block) * 4;
    for (I k = 0, i = first; k < 4 && i < n; ++k, ++i) {
      const I t = i / F, c = i % HF;
      const T kept_base = DropoutKey::apply_kept(widen(base[i]), (kept >> k) & 1u, keep_scale);
      dx[i] = narrow<S>(kept_base + g1[t] * a1[c] + g2[t] * a2[c]);
    }
  }
};

}  // namespace

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask&,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  const long long n = grad_x.numel(), F = base.size(2), HF = base.size(1) * F;
  attention::dispatch_rows(base.dtype(), "head_dot_pair_grad_x", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    auto launch = [&](auto index) {
      using I = decltype(index);
      detail::launch_for_each(
          "head_dot_pair_grad_x", (n + 3) / 4,
          PairGradX<S, I>{base.data<S>(), a1.data<T>(), g1.data<T>(), a2.data<T>(), g2.data<T>(),
                          grad_x.data<S>(), static_cast<I>(n), static_cast<I>(HF), static_cast<I>(F), key,
                          static_cast<T>(key.active() ? keep_scale : 1.0)});
    };
    if (n < (1LL << 31))
      launch(uint32_t{});
    else
      launch(uint64_t{});
  });
}

namespace {

// out1 = head_dot(x, a1) and, with a2, out2 = head_dot(x, a2), in one kernel (with vr's values
// and rows).
void head_dots_forward(const Tensor& x, const Tensor& a1, Tensor& out1, const Tensor* a2, Tensor* out2,
                       const DropoutKey& key = {}, double keep_scale = 1.0, Tensor* values = nullptr,
                       Tensor* rows = nullptr) {
  const long long NH = out1.numel();
  if (NH == 0) return;
  const int H = static_cast<int>(x.size(1)), F = static_cast<int>(x.size(2));
  attention::dispatch_rows(x.dtype(), "head_dot", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    ValueRows<S> vr;
    if (values) vr.values = values->data<S>(), vr.key = key, vr.keep_scale = static_cast<T>(keep_scale);
    if (rows) vr.rows = rows->data<S>(), vr.row_len = static_cast<int>(rows->size(1));
    auto launch_out = [&](auto vec, auto out_zero) {
      using O = decltype(out_zero);
      head_dot_forward_kernel<S, decltype(vec)::value, O><<<cuda::blocks_for(NH), 256, 0, cuda::stream()>>>(
          x.data<S>(), a1.data<T>(), out1.data<O>(), a2 ? a2->data<T>() : nullptr,
          out2 ? out2->data<O>() : nullptr, NH, H, F, vr);
      CUDA_CHECK_LAUNCH("head_dot_forward_kernel");
    };
    // The dots in f32 beside bf16 rows (the projected op's el and er), else in the rows' dtype.
    auto launch = [&](auto vec) {
      if constexpr (!std::is_same_v<S, T>)
        if (out1.dtype() == dtype_of<T>::value) return launch_out(vec, T{});
      launch_out(vec, S{});
    };
    constexpr int kVec = 16 / sizeof(S);  // 4 floats, 2 doubles or 8 bf16: 16 bytes
    if (F % kVec == 0 && vr.row_len % kVec == 0 && detail::all_aligned(16, {x.data<S>(), vr.values, vr.rows}))
      launch(std::integral_constant<int, kVec>{});
    else
      launch(std::integral_constant<int, 1>{});
  });
}

// grad_a1 = sum_n g1 x and, with g2, grad_a2 = sum_n g2 x: one partial pass over x, one sum launch.
void head_dots_grad_a(const Tensor& x, const Tensor& g1, Tensor& grad_a1, const Tensor* g2, Tensor* grad_a2) {
  const long long N = x.size(0);
  const int H = static_cast<int>(x.size(1)), F = static_cast<int>(x.size(2)), HF = H * F;
  if (HF == 0) return;
  const long long rows = head_dot_detail::rows_per_block(N);
  const long long blocks = (N + rows - 1) / rows;
  if (blocks == 0) {
    grad_a1.zero_();
    if (grad_a2) grad_a2->zero_();
    return;
  }
  const int halves = g2 ? 2 : 1;
  attention::dispatch_rows(x.dtype(), "head_dot backward", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    Tensor partial =
        Tensor::empty({halves, blocks, H, F}, dtype_of<T>::value, Device::cuda, "head_dot partial d a");
    const unsigned threads = static_cast<unsigned>(std::min(256, (HF + 31) / 32 * 32));
    auto partials = [&](auto g_zero) {  // the dots' gradients in f32 beside bf16 rows, or in S
      using O = decltype(g_zero);
      head_dot_grad_a_partial_kernel<S, O><<<static_cast<unsigned>(blocks), threads, 0, cuda::stream()>>>(
          x.data<S>(), g1.data<O>(), g2 ? g2->data<O>() : nullptr, partial.data<T>(), N, H, F,
          static_cast<int>(rows), blocks);
      CUDA_CHECK_LAUNCH("head_dot_grad_a_partial_kernel");
    };
    bool in_compute = false;
    if constexpr (!std::is_same_v<S, T>) in_compute = g1.dtype() == dtype_of<T>::value;
    if constexpr (!std::is_same_v<S, T>)
      if (in_compute) partials(T{});
    if (!in_compute) partials(S{});
    // Stage 2: d a[c] = the blocks' partials added in block order.
    detail::ordered_column_sums<T>("head_dot d a sum", partial.data<T>(), blocks, HF, halves,
                                   grad_a1.data<T>(), grad_a2 ? grad_a2->data<T>() : nullptr);
  });
}

}  // namespace

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  head_dots_forward(x, a, out, nullptr, nullptr);
}

void head_dot_pair_dropout_forward(const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                                   double keep_scale, KeepMask&, Tensor& out1, Tensor& out2, Tensor* values,
                                   Tensor* rows) {
  head_dots_forward(x, a1, out1, &a2, &out2, key, keep_scale, values, rows);
}

void head_dot_pair_grad_a(const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1,
                          Tensor& grad_a2) {
  head_dots_grad_a(x, g1, grad_a1, &g2, &grad_a2);
}

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  const int H = static_cast<int>(x.size(1)), F = static_cast<int>(x.size(2)), HF = H * F;
  attention::dispatch_rows(x.dtype(), "head_dot backward", [&](auto zero) {
    using S = decltype(zero);
    using T = Compute<S>;
    if (grad_x && grad_x->numel() > 0) {
      const long long n = grad_x->numel();
      auto launch = [&](auto index) {
        using I = decltype(index);
        head_dot_grad_x_kernel<S, I><<<cuda::blocks_for(n), 256, 0, cuda::stream()>>>(
            a.data<T>(), grad_out.data<S>(), grad_x->data<S>(), static_cast<I>(n), static_cast<I>(HF),
            static_cast<I>(F));
      };
      if (n < (1LL << 31))
        launch(uint32_t{});  // (t + grid stride stays below 2^32)
      else
        launch(uint64_t{});
      CUDA_CHECK_LAUNCH("head_dot_grad_x_kernel");
    }
  });
  if (grad_a) head_dots_grad_a(x, grad_out, *grad_a, nullptr, nullptr);
}

}  // namespace gat::ops::cuda_impl
