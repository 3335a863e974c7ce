#include "gat/framework/ops/activations.h"

#include <algorithm>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/bf16_in_f32.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

// relu and leaky_relu are one op; relu has slope 0.
Tensor leaky_relu_op(const char* op, const Tensor& x, double slope) {
  if (detail::bf16_in_f32_on_cpu(x))
    return detail::rounded_to_bf16(leaky_relu_op(op, detail::widened(x), slope));
  detail::check_float_or_bf16(op, "x", x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
  kernels::leaky_relu_forward(x, slope, out);
  return autograd::record(op, out, {x}, [op, x_saved = x.detach(), slope](const Tensor& g) {
    Tensor grad_x = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device(), op);
    kernels::leaky_relu_backward(x_saved, g, slope, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace

Tensor relu(const Tensor& x) { return leaky_relu_op("relu", x, 0.0); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return leaky_relu_op("leaky_relu", x, negative_slope);
}

Tensor elu(const Tensor& x, double alpha) {
  if (detail::bf16_in_f32_on_cpu(x)) return detail::rounded_to_bf16(elu(detail::widened(x), alpha));
  detail::check_float_or_bf16("elu", "x", x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "elu");
  kernels::elu_forward(x, alpha, out);
  return autograd::record("elu", out, {x}, [x_saved = x.detach(), alpha](const Tensor& g) {
    Tensor grad_x = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device(), "elu backward");
    kernels::elu_backward(x_saved, g, alpha, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

namespace kernels {
void leaky_relu_forward(const Tensor& x, double negative_slope, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::leaky_relu_forward(x, negative_slope, out));
  cpu_impl::leaky_relu_forward(x, negative_slope, out);
}
void leaky_relu_backward(const Tensor& x, const Tensor& grad_out, double negative_slope, Tensor& grad_x) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::leaky_relu_backward(x, grad_out, negative_slope, grad_x));
  cpu_impl::leaky_relu_backward(x, grad_out, negative_slope, grad_x);
}
void elu_forward(const Tensor& x, double alpha, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::elu_forward(x, alpha, out));
  cpu_impl::elu_forward(x, alpha, out);
}
void elu_backward(const Tensor& x, const Tensor& grad_out, double alpha, Tensor& grad_x) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::elu_backward(x, grad_out, alpha, grad_x));
  cpu_impl::elu_backward(x, grad_out, alpha, grad_x);
}
}  // namespace kernels

namespace cpu_impl {

void leaky_relu_forward(const Tensor& x, double negative_slope, Tensor& out) {
  detail::cpu_map(x, out, [negative_slope](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : static_cast<T>(negative_slope) * v;
  });
}

void leaky_relu_backward(const Tensor& x, const Tensor& grad_out, double negative_slope, Tensor& grad_x) {
  detail::cpu_map(x, grad_out, grad_x, [negative_slope](auto v, auto g) {
    using T = decltype(v);
    return v > T(0) ? g : static_cast<T>(negative_slope) * g;
  });
}

void elu_forward(const Tensor& x, double alpha, Tensor& out) {
  detail::cpu_map(x, out, [alpha](auto v) { return detail::vec_elu(v, static_cast<decltype(v)>(alpha)); });
}

// Both sides computed and one selected: a loop without branches or calls vectorises.
void elu_backward(const Tensor& x, const Tensor& grad_out, double alpha, Tensor& grad_x) {
  detail::cpu_map(x, grad_out, grad_x, [alpha](auto v, auto g) {
    using T = decltype(v);
    const T negative = static_cast<T>(alpha) * detail::vec_exp(std::min(v, T(0))) * g;
    return v > T(0) ? g : negative;
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
