#include "gat/framework/ops/dropout.h"

#include <memory>
#include <vector>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace cpu_impl {

namespace {

// out = x * keep * keep_scale with the decisions in kept.
void apply_kept(const Tensor& x, const KeepMask& kept, double keep_scale, Tensor& out) {
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();  // (n,)
    T* po = out.data<T>();      // (n,)
    const T s = static_cast<T>(keep_scale);
    detail::parallel_for(out.numel(),
                         [&, s](int64_t i) { po[i] = DropoutKey::apply_kept(px[i], kept[i], s); });
  });
}

}  // namespace

void dropout_forward(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out, KeepMask& kept) {
  kept = KeepMask(key, x.numel());
  apply_kept(x, kept, keep_scale, out);
}

void dropout_backward(const Tensor& grad_out, const DropoutKey&, double keep_scale, const KeepMask& kept,
                      Tensor& grad_x) {
  apply_kept(grad_out, kept, keep_scale, grad_x);
}

}  // namespace cpu_impl

namespace kernels {

void dropout_forward(const Tensor& x, const DropoutKey& key, double keep_scale, Tensor& out, KeepMask& kept) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::dropout_forward(x, key, keep_scale, out, kept));
  cpu_impl::dropout_forward(x, key, keep_scale, out, kept);
}

void dropout_backward(const Tensor& grad_out, const DropoutKey& key, double keep_scale, const KeepMask& kept,
                      Tensor& grad_x) {
  if (grad_out.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::dropout_backward(grad_out, key, keep_scale, kept, grad_x));
  cpu_impl::dropout_backward(grad_out, key, keep_scale, kept, grad_x);
}

}  // namespace kernels

double dropout_keep_scale(const DropoutKey& key) { return 1.0 / (1.0 - static_cast<double>(key.p)); }

Tensor dropout(const Tensor& x, const DropoutKey& key) {
  if (detail::bf16_in_f32_on_cpu(x)) return detail::rounded_to_bf16(dropout(detail::widened(x), key));
  detail::check_float_or_bf16("dropout", "x", x);
  GAT_CHECK(key.p >= 0.0f && key.p < 1.0f, "dropout: drop probability p = ", key.p, " is outside [0, 1)");
  if (!key.active()) return x;
  const double keep_scale = dropout_keep_scale(key);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "dropout");
  auto kept = std::make_shared<KeepMask>();
  kernels::dropout_forward(x, key, keep_scale, out, *kept);
  return autograd::record("dropout", out, {x}, [key, keep_scale, kept](const Tensor& g) {
    Tensor grad_x = Tensor::empty(g.shape(), g.dtype(), g.device(), "d dropout");
    kernels::dropout_backward(g, key, keep_scale, *kept, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace gat::ops
