#include "gat/framework/ops/attention/head_dot.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/attention/detail/attention_dtypes.h"
#include "gat/framework/ops/attention/detail/attention_rows.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"

namespace gat::ops {

namespace cpu_impl {

namespace {

using attention_rows::with_head_width;

// parallel_for's cost of an element (N, H, F) in the loops below: a head of 8 features is one
// vector operation, another width a loop over its features, about 8 times the work an element.
// (Cora's output layer, 7 features, ran its d att and d x on one thread: a step's serial work.)
template <class IntF>
constexpr int64_t element_cost() {
  return std::is_same_v<IntF, std::integral_constant<int64_t, 8>> ? 1 : 8;
}

// out_k[n,h] = x[n,h,:] . a_k[h,:] for the `count` (1 or 2) pairs (a_k (H, F), out_k (N, H)) in one
// pass over x, each dot summed in feature order from 0. Eight heads of 8 features take their 8 dots
// in one vector (dot_heads8: the same sums).
void head_dots(const Tensor& x, const Tensor* const* a, Tensor* const* out, int count) {
  const int64_t N = x.size(0), H = x.size(1);
  dispatch_float(x.dtype(), "head_dot", [&](auto zero) {
    using T = decltype(zero);
    using Group = typename attention_rows::HeadGroupOf<T, 8>::type;
    const T* xp = x.data<T>();                                                 // (N, H, F)
    const T *a1 = a[0]->data<T>(), *a2 = count > 1 ? a[1]->data<T>() : a1;     // (H, F)
    T *o1 = out[0]->data<T>(), *o2 = count > 1 ? out[1]->data<T>() : nullptr;  // (N, H)
    with_head_width(x.size(2), [&](auto F) {
      constexpr bool eights = std::is_same_v<decltype(F), std::integral_constant<int64_t, 8>>;
      detail::parallel_for(
          N,
          [=](int64_t n) GAT_GROUP_FN_LAMBDA {
            const T* xn = xp + n * H * F;  // (H, F)
            int64_t h = 0;
            if constexpr (eights)
              for (; h + 8 <= H; h += 8) {
                attention_rows::store_group(o1 + n * H + h,
                                            attention_rows::dot_heads8<Group>(xn + h * F, a1 + h * F));
                if (o2)
                  attention_rows::store_group(o2 + n * H + h,
                                              attention_rows::dot_heads8<Group>(xn + h * F, a2 + h * F));
              }
            for (; h < H; ++h) {
              o1[n * H + h] = attention_rows::dot_head(xn + h * F, a1 + h * F, F);
              if (o2) o2[n * H + h] = attention_rows::dot_head(xn + h * F, a2 + h * F, F);
            }
          },
          H * F * count);
    });
  });
}

}  // namespace

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  const Tensor* in[] = {&a};
  Tensor* outs[] = {&out};
  head_dots(x, in, outs, 1);
}

namespace {

// d a_k[h,f] = sum_n g_k[n,h] x[n,h,f] for the `count` (1 or 2) pairs (g_k (N, H), d a_k (H, F)) in one
// pass over x. Stage 1: one partial (H, F) per block of rows and pair; stage 2: the partials summed in
// order.
void grad_a_sums(const Tensor& x, const Tensor* const* grad_out, Tensor* const* grad_a, int count) {
  const int64_t N = x.size(0), H = x.size(1), F = x.size(2), HF = H * F;
  dispatch_float(x.dtype(), "head_dot backward", [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data<T>();                                                            // (N, H, F)
    const T *g1 = grad_out[0]->data<T>(), *g2 = count > 1 ? grad_out[1]->data<T>() : g1;  // (N, H)
    const int64_t rows = head_dot_detail::rows_per_block(N);
    const int64_t blocks = (N + rows - 1) / rows;
    std::vector<T> partial(static_cast<size_t>(count * blocks * HF), T(0));  // (count, blocks, H, F)
    T* partials = partial.data();
    with_head_width(F, [&](auto Fc) {  // a head of 8 features one vector (lane f adds what f adds)
      using Group = typename attention_rows::HeadGroupOf<T, 8>::type;
      constexpr bool eight = std::is_same_v<decltype(Fc), std::integral_constant<int64_t, 8>>;
      detail::parallel_for(
          blocks,
          [=](int64_t b) GAT_GROUP_FN_LAMBDA {
            T* p1 = partials + b * HF;             // (H, F)
            T* p2 = partials + (blocks + b) * HF;  // (H, F), when count is 2
            for (int64_t n = b * rows; n < std::min(N, (b + 1) * rows); ++n)
              for (int64_t h = 0; h < H; ++h) {
                const T* xh = xp + (n * H + h) * Fc;
                for (int pair = 0; pair < count; ++pair) {
                  const T gh = (pair == 0 ? g1 : g2)[n * H + h];
                  T* p = (pair == 0 ? p1 : p2) + h * Fc;
                  if constexpr (eight)
                    attention_rows::store_group(
                        p, attention_rows::load_group<Group>(p) + gh * attention_rows::load_group<Group>(xh));
                  else
                    for (int64_t f = 0; f < Fc; ++f) p[f] += gh * xh[f];
                }
              }
          },
          count * rows * HF * element_cost<decltype(Fc)>());
    });
    for (int pair = 0; pair < count; ++pair) {
      T* da = grad_a[pair]->data<T>();  // (H, F)
      std::fill(da, da + HF, T(0));
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t c = 0; c < HF; ++c) da[c] += partial[static_cast<size_t>((pair * blocks + b) * HF + c)];
    }
  });
}

}  // namespace

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  const int64_t N = x.size(0), H = x.size(1), F = x.size(2), HF = H * F;
  if (grad_x) {
    dispatch_float(x.dtype(), "head_dot backward", [&](auto zero) {
      using T = decltype(zero);
      const T* ap = a.data<T>();        // (H, F)
      const T* g = grad_out.data<T>();  // (N, H)
      T* dx = grad_x->data<T>();        // (N, H, F)
      with_head_width(F, [&](auto Fc) {
        detail::parallel_for(
            N,
            [=](int64_t n) {
              for (int64_t h = 0; h < H; ++h) {
                const T gh = g[n * H + h];
                for (int64_t f = 0; f < Fc; ++f) dx[(n * H + h) * Fc + f] = gh * ap[h * Fc + f];
              }
            },
            HF);
      });
    });
  }
  if (grad_a) {
    const Tensor* g[] = {&grad_out};
    Tensor* d[] = {grad_a};
    grad_a_sums(x, g, d, 1);
  }
}

// The CPU takes both dots in one pass over x, and the dropout in another.
void head_dot_pair_dropout_forward(const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                                   double keep_scale, KeepMask& kept, Tensor& out1, Tensor& out2,
                                   Tensor* values, Tensor*) {
  const Tensor* in[] = {&a1, &a2};
  Tensor* outs[] = {&out1, &out2};
  head_dots(x, in, outs, 2);
  if (values) dropout_forward(x, key, keep_scale, *values, kept);
}

void head_dot_pair_grad_a(const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1,
                          Tensor& grad_a2) {
  const Tensor* g[] = {&g1, &g2};
  Tensor* d[] = {&grad_a1, &grad_a2};
  grad_a_sums(x, g, d, 2);
}

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask& kept,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  const int64_t N = base.size(0), H = base.size(1), F = base.size(2);
  dispatch_float(base.dtype(), "head_dot_pair_grad_x", [&](auto zero) {
    using T = decltype(zero);
    const T* b = base.data<T>();                     // (N, H, F)
    const T *p1 = a1.data<T>(), *p2 = a2.data<T>();  // (H, F)
    const T *q1 = g1.data<T>(), *q2 = g2.data<T>();  // (N, H)
    T* dx = grad_x.data<T>();                        // (N, H, F)
    const T s = static_cast<T>(keep_scale);
    const uint8_t* keep = key.active() ? kept.data() : nullptr;  // (N, H, F) or null
    // Row by row: no division per element. A head of 8 features is one vector (lane f does what
    // the loop does for f).
    with_head_width(F, [&](auto Fc) {
      using Group = typename attention_rows::HeadGroupOf<T, 8>::type;
      constexpr bool eight = std::is_same_v<decltype(Fc), std::integral_constant<int64_t, 8>>;
      detail::parallel_for(
          N,
          [=](int64_t n) GAT_GROUP_FN_LAMBDA {
            for (int64_t h = 0; h < H; ++h) {
              const int64_t r = n * H + h, i0 = r * Fc;
              if constexpr (eight) {
                Group x = attention_rows::load_group<Group>(b + i0);
                if (keep)
                  for (int l = 0; l < 8; ++l) x[l] = DropoutKey::apply_kept(x[l], keep[i0 + l], s);
                attention_rows::store_group(dx + i0,
                                            x + q1[r] * attention_rows::load_group<Group>(p1 + h * Fc) +
                                                q2[r] * attention_rows::load_group<Group>(p2 + h * Fc));
              } else {
                for (int64_t f = 0; f < Fc; ++f) {
                  const int64_t i = i0 + f;
                  const T kept_base = keep ? DropoutKey::apply_kept(b[i], keep[i], s) : b[i];
                  dx[i] = kept_base + q1[r] * p1[h * Fc + f] + q2[r] * p2[h * Fc + f];
                }
              }
            }
          },
          H * F * element_cost<decltype(Fc)>());
    });
  });
}

}  // namespace cpu_impl

namespace kernels {

void head_dot_pair_dropout_forward(const Tensor& x, const Tensor& a1, const Tensor& a2, const DropoutKey& key,
                                   double keep_scale, KeepMask& kept, Tensor& out1, Tensor& out2,
                                   Tensor* values, Tensor* rows) {
  if (x.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::head_dot_pair_dropout_forward(x, a1, a2, key, keep_scale, kept, out1, out2, values, rows));
  GAT_CHECK(!rows, "head_dot_pair_dropout_forward: packed rows are written on CUDA only");
  cpu_impl::head_dot_pair_dropout_forward(x, a1, a2, key, keep_scale, kept, out1, out2, values, rows);
}

void head_dot_pair_grad_a(const Tensor& x, const Tensor& g1, const Tensor& g2, Tensor& grad_a1,
                          Tensor& grad_a2) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_pair_grad_a(x, g1, g2, grad_a1, grad_a2));
  cpu_impl::head_dot_pair_grad_a(x, g1, g2, grad_a1, grad_a2);
}

void head_dot_pair_grad_x(const Tensor& base, const DropoutKey& key, double keep_scale, const KeepMask& kept,
                          const Tensor& a1, const Tensor& g1, const Tensor& a2, const Tensor& g2,
                          Tensor& grad_x) {
  if (grad_x.numel() == 0) return;
  if (grad_x.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2, grad_x));
  cpu_impl::head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2, grad_x);
}

void head_dot_forward(const Tensor& x, const Tensor& a, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_forward(x, a, out));
  cpu_impl::head_dot_forward(x, a, out);
}

void head_dot_backward(const Tensor& x, const Tensor& a, const Tensor& grad_out, Tensor* grad_x,
                       Tensor* grad_a) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::head_dot_backward(x, a, grad_out, grad_x, grad_a));
  cpu_impl::head_dot_backward(x, a, grad_out, grad_x, grad_a);
}

}  // namespace kernels

Tensor head_dot(const Tensor& x, const Tensor& a) {
  const char* op = "head_dot";
  // bf16 x beside an f32 a runs in the CUDA kernels: out and d x bf16, d a f32.
  if (!attention_dtypes::bf16_rows_on_cuda(x, a) && detail::bf16_in_f32(op, x, a))
    return detail::rounded_to_bf16(head_dot(detail::widened(x), detail::widened(a)));
  attention_dtypes::check_attention_float(op, "x", x);
  check_dim(op, "x", x, 3);
  attention_dtypes::check_compute_dtype(op, "a", a, "x", x);
  check_shape(op, "a", a, {x.size(1), x.size(2)});

  Tensor out = Tensor::empty({x.size(0), x.size(1)}, x.dtype(), x.device(), op);
  kernels::head_dot_forward(x, a, out);

  const bool need_x = x.requires_grad(), need_a = a.requires_grad();
  return autograd::record(op, out, {x, a},
                          [xd = x.detach(), ad = a.detach(), need_x, need_a](const Tensor& grad_out) {
                            check_same("head_dot backward", "grad_out", grad_out, "x", xd);
                            check_shape("head_dot backward", "grad_out", grad_out, {xd.size(0), xd.size(1)});
                            Tensor dx, da;
                            if (need_x) dx = Tensor::empty(xd.shape(), xd.dtype(), xd.device(), "d x");
                            if (need_a) da = Tensor::empty(ad.shape(), ad.dtype(), ad.device(), "d a");
                            Tensor* px = need_x ? &dx : nullptr;
                            Tensor* pa = need_a ? &da : nullptr;
                            kernels::head_dot_backward(xd, ad, grad_out, px, pa);
                            return std::vector<Tensor>{dx, da};
                          });
}

}  // namespace gat::ops
