#include "gat/framework/ops/attention/linear_head_dot.h"

#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/matmul.h"

namespace gat::ops::kernels {

namespace {

// P = x W (N, K) x (K, H F), viewed (N, H, F) as a1's heads.
Tensor projection(const Tensor& x, const Tensor& w, const Tensor& a1) {
  Tensor p = Tensor::empty({x.size(0), w.size(1)}, x.dtype(), x.device(), "linear_head_dot P");
  gemm(x, false, w, false, p);
  return p.view({x.size(0), a1.size(0), a1.size(1)});
}

}  // namespace

void linear_head_dot_pair_dropout_forward(const Tensor& x, const Tensor& w, const Tensor& a1,
                                          const Tensor& a2, const DropoutKey& key, double keep_scale,
                                          KeepMask& kept, Tensor& values, Tensor& out1, Tensor& out2,
                                          Tensor* keep_bits) {
  if (x.is_cuda() && GAT_CUDA_CALL(cuda_impl::linear_head_dot_pair_dropout_forward(
                         x, w, a1, a2, key, keep_scale, values, out1, out2, keep_bits)))
    return;
  GAT_CHECK(x.dtype() != DType::bf16, "linear_head_dot_pair_dropout_forward: bf16 x ", x.describe(),
            " that the fused CUDA kernels do not take (cuda_impl::linear_head_dot_takes_bf16, alignment)");
  if (keep_bits) *keep_bits = Tensor();  // not written: the backward draws
  head_dot_pair_dropout_forward(projection(x, w, a1), a1, a2, key, keep_scale, kept, out1, out2, &values,
                                nullptr);
}

void linear_head_dot_pair_backward(const Tensor& x, const Tensor& w, const Tensor& a1, const Tensor& a2,
                                   const DropoutKey& key, double keep_scale, const KeepMask& kept,
                                   const Tensor& keep_bits, const Tensor& base, const Tensor& g1,
                                   const Tensor& g2, Tensor* grad_x, Tensor* grad_w, Tensor* grad_a1,
                                   Tensor* grad_a2) {
  // The fused pass gives grad_w and both grad_a at once; grad_x needs dP itself.
  if (x.is_cuda() && !grad_x && grad_w && grad_a1 && grad_a2 &&
      GAT_CUDA_CALL(cuda_impl::linear_head_dot_pair_backward(x, w, a1, a2, key, keep_scale, keep_bits, base,
                                                             g1, g2, *grad_w, *grad_a1, *grad_a2)))
    return;
  GAT_CHECK(x.dtype() != DType::bf16, "linear_head_dot_pair_backward: bf16 x ", x.describe(),
            " is taken by the fused CUDA kernels alone, for d weight and both d att without d x");
  if (grad_x || grad_w) {
    Tensor dp = Tensor::empty(base.shape(), base.dtype(), base.device(), "linear_head_dot dP");  // (N, H, F)
    head_dot_pair_grad_x(base, key, keep_scale, kept, a1, g1, a2, g2, dp);
    const Tensor dp2 = dp.view({x.size(0), w.size(1)});
    if (grad_x) gemm(dp2, false, w, true, *grad_x);
    if (grad_w) gemm(x, true, dp2, false, *grad_w);
  }
  if (grad_a1 || grad_a2) {
    Tensor unused1, unused2;  // head_dot_pair_grad_a writes both
    Tensor& d1 = grad_a1 ? *grad_a1 : (unused1 = Tensor::empty(a1.shape(), a1.dtype(), a1.device(), "d a1"));
    Tensor& d2 = grad_a2 ? *grad_a2 : (unused2 = Tensor::empty(a2.shape(), a2.dtype(), a2.device(), "d a2"));
    head_dot_pair_grad_a(projection(x, w, a1), g1, g2, d1, d2);
  }
}

}  // namespace gat::ops::kernels
