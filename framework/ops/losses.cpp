#include "gat/framework/ops/losses.h"

#include <algorithm>
#include <cmath>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops {

namespace {

void check_pair(const char* op, const Tensor& x, const Tensor& y) {
  check_float(op, "input", x);
  check_same(op, "input", x, "target", y);
  check_shape(op, "target", y, x.shape());
}

// The elementwise terms, with autograd for both x and y.
Tensor loss_terms(const char* op, PointwiseLoss loss, const Tensor& x, const Tensor& y) {
  Tensor terms = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
  kernels::loss_terms_forward(loss, x, y, terms);
  const bool need_x = x.requires_grad(), need_y = y.requires_grad();
  return autograd::record(
      op, terms, {x, y}, [op, loss, need_x, need_y, x = x.detach(), y = y.detach()](const Tensor& g) {
        Tensor grad_x, grad_y;
        if (need_x) grad_x = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
        if (need_y) grad_y = Tensor::empty(y.shape(), y.dtype(), y.device(), op);
        kernels::loss_terms_backward(loss, x, y, g, need_x ? &grad_x : nullptr, need_y ? &grad_y : nullptr);
        return std::vector<Tensor>{grad_x, grad_y};
      });
}

Tensor mean_loss(const char* op, PointwiseLoss loss, const Tensor& x, const Tensor& y) {
  check_pair(op, x, y);
  GAT_CHECK(x.numel() > 0, op, ": 'input' ", x.describe(), " has no elements: the mean is undefined");
  return mean(loss_terms(op, loss, x, y));
}

Tensor masked_mean_loss(const char* op, PointwiseLoss loss, const Tensor& x, const Tensor& y,
                        const RowIndex& index) {
  check_pair(op, x, y);
  GAT_CHECK(x.dim() >= 1, op, ": 'input' ", x.describe(), " has no rows to index");
  GAT_CHECK(index.size() > 0, op, ": the index is empty: the mean over no rows is undefined");
  return mean_loss(op, loss, index_rows(x, index), index_rows(y, index));
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  return mean_loss("mse_loss", PointwiseLoss::mse, input, target);
}
Tensor mse_loss(const Tensor& input, const Tensor& target, const RowIndex& index) {
  return masked_mean_loss("mse_loss", PointwiseLoss::mse, input, target, index);
}
Tensor mse_loss(const Tensor& input, const Tensor& target, const Tensor& index) {
  check_defined("mse_loss", "input", input);
  return mse_loss(input, target, RowIndex(index, input.device()));
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target) {
  return mean_loss("binary_cross_entropy_with_logits", PointwiseLoss::bce_with_logits, logits, target);
}
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const RowIndex& index) {
  return masked_mean_loss("binary_cross_entropy_with_logits", PointwiseLoss::bce_with_logits, logits, target,
                          index);
}
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& index) {
  check_defined("binary_cross_entropy_with_logits", "logits", logits);
  return binary_cross_entropy_with_logits(logits, target, RowIndex(index, logits.device()));
}

namespace kernels {
void loss_terms_forward(PointwiseLoss loss, const Tensor& x, const Tensor& y, Tensor& terms) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::loss_terms_forward(loss, x, y, terms));
  cpu_impl::loss_terms_forward(loss, x, y, terms);
}
void loss_terms_backward(PointwiseLoss loss, const Tensor& x, const Tensor& y, const Tensor& grad_terms,
                         Tensor* grad_x, Tensor* grad_y) {
  if (x.is_cuda())
    return GAT_CUDA_CALL(cuda_impl::loss_terms_backward(loss, x, y, grad_terms, grad_x, grad_y));
  cpu_impl::loss_terms_backward(loss, x, y, grad_terms, grad_x, grad_y);
}
}  // namespace kernels

namespace cpu_impl {

void loss_terms_forward(PointwiseLoss loss, const Tensor& x, const Tensor& y, Tensor& terms) {
  if (loss == PointwiseLoss::mse)
    return detail::cpu_map(x, y, terms, [](auto xv, auto yv) { return (xv - yv) * (xv - yv); });
  detail::cpu_map(x, y, terms, [](auto xv, auto yv) {
    using T = decltype(xv);
    return std::max(xv, T(0)) - xv * yv + std::log1p(std::exp(-std::abs(xv)));
  });
}

void loss_terms_backward(PointwiseLoss loss, const Tensor& x, const Tensor& y, const Tensor& grad_terms,
                         Tensor* grad_x, Tensor* grad_y) {
  dispatch_float(x.dtype(), "loss backward", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();                     // (n,)
    const T* py = y.data<T>();                     // (n,)
    const T* g = grad_terms.data<T>();             // (n,)
    T* dx = grad_x ? grad_x->data<T>() : nullptr;  // (n,)
    T* dy = grad_y ? grad_y->data<T>() : nullptr;  // (n,)
    const bool mse = loss == PointwiseLoss::mse;
    detail::parallel_for(x.numel(), [=](int64_t i) {
      const T d = mse ? T(2) * (px[i] - py[i]) : T(1) / (T(1) + std::exp(-px[i])) - py[i];
      if (dx) dx[i] = d * g[i];
      if (dy) dy[i] = (mse ? -d : -px[i]) * g[i];
    });
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
