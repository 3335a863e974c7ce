#include "gat/framework/ops/elu_dropout.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/dropout.h"

namespace gat::ops {

namespace cpu_impl {

namespace {

// f(i, keep_i) for i in [0, n), keep_i (0 or 1) the forward's decision in kept, or 1 for an
// inactive key.
template <class F>
void for_each_with_keep(const DropoutKey& key, const KeepMask& kept, int64_t n, F f) {
  if (key.active()) return detail::parallel_for(n, [&kept, f](int64_t i) { f(i, kept[i]); });
  detail::parallel_for(n, [f](int64_t i) { f(i, uint8_t{1}); });
}

}  // namespace

// The forward's elements in blocks of this many: a block's ELU in one loop, then its dropout in
// another. In one loop the mask's bytes made the vectoriser take 32 elements at a time, whose
// exponentials spilled registers (a third of the pass).
constexpr int64_t kEluBlock = 256;

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale, Tensor& out,
                         KeepMask& kept) {
  if (key.active()) kept = KeepMask(key, x.numel());
  dispatch_float(x.dtype(), "elu_dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();                                   // (n,)
    T* po = out.data<T>();                                       // (n,)
    const uint8_t* keep = key.active() ? kept.data() : nullptr;  // (n,) or null
    const T a = static_cast<T>(alpha), s = static_cast<T>(keep_scale);
    const int64_t n = out.numel();
    detail::parallel_for((n + kEluBlock - 1) / kEluBlock,
                         [=](int64_t block) {
                           const int64_t begin = block * kEluBlock, end = std::min(n, begin + kEluBlock);
                           for (int64_t i = begin; i < end; ++i) po[i] = detail::vec_elu(px[i], a);
                           for (int64_t i = begin; keep && i < end; ++i)
                             po[i] = DropoutKey::apply_kept(po[i], keep[i], s);
                         },
                         kEluBlock);
  });
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha, const DropoutKey& key,
                          double keep_scale, const KeepMask& kept, Tensor& grad_x) {
  dispatch_float(out.dtype(), "elu_dropout backward", [&](auto zero) {
    using T = decltype(zero);
    const T* po = out.data<T>();       // (n,)
    const T* pg = grad_out.data<T>();  // (n,)
    T* pgx = grad_x.data<T>();         // (n,)
    const T s = static_cast<T>(keep_scale), alpha_s = static_cast<T>(alpha * keep_scale);
    for_each_with_keep(key, kept, out.numel(), [=](int64_t i, uint8_t keep) {
      pgx[i] = DropoutKey::apply_kept(pg[i], keep, po[i] > T(0) ? s : po[i] + alpha_s);
    });
  });
}

}  // namespace cpu_impl

namespace kernels {

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale, Tensor& out,
                         KeepMask& kept) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::elu_dropout_forward(x, alpha, key, keep_scale, out, kept));
  cpu_impl::elu_dropout_forward(x, alpha, key, keep_scale, out, kept);
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha, const DropoutKey& key,
                          double keep_scale, const KeepMask& kept, Tensor& grad_x) {
  if (out.is_cuda())
    return GAT_CUDA_CALL(
        cuda_impl::elu_dropout_backward(out, grad_out, alpha, key, keep_scale, kept, grad_x));
  cpu_impl::elu_dropout_backward(out, grad_out, alpha, key, keep_scale, kept, grad_x);
}

}  // namespace kernels

Tensor elu_dropout(const Tensor& x, double alpha, const DropoutKey& key) {
  if (detail::bf16_in_f32_on_cpu(x))
    return detail::rounded_to_bf16(elu_dropout(detail::widened(x), alpha, key));
  detail::check_float_or_bf16("elu_dropout", "x", x);
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "elu_dropout: drop probability p = ", key.p, " is outside [0, 1)");
  GAT_CHECK(alpha >= 0.0, "elu_dropout: alpha = ", alpha,
            " is negative or NaN; the gradient is taken from the output, which needs alpha >= 0");
  const double keep_scale = key.active() ? dropout_keep_scale(key) : 1.0;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "elu_dropout");
  auto kept = std::make_shared<KeepMask>();
  kernels::elu_dropout_forward(x, alpha, key, keep_scale, out, *kept);
  return autograd::record(
      "elu_dropout", out, {x}, [out_saved = out.detach(), alpha, key, keep_scale, kept](const Tensor& g) {
        Tensor grad_x = Tensor::empty(g.shape(), g.dtype(), g.device(), "d elu_dropout");
        kernels::elu_dropout_backward(out_saved, g, alpha, key, keep_scale, *kept, grad_x);
        return std::vector<Tensor>{grad_x};
      });
}

}  // namespace gat::ops
