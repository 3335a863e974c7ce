#include "gat/framework/ops/activations.h"

#include <algorithm>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/loops.h"
#include "gat/framework/ops/vec_math.h"

namespace gat::ops {

namespace {

Tensor leaky_relu_forward(const char* op, const Tensor& x, double slope) {
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
    GAT_CUDA_CALL(cuda_impl::leaky_relu_forward(x, slope, out));
    return out;
  }
  return detail::cpu_map(op, x, [slope](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : static_cast<T>(slope) * v;
  });
}

Tensor leaky_relu_backward(const char* op, const Tensor& x, const Tensor& g, double slope) {
  if (x.is_cuda()) {
    Tensor grad_x = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
    GAT_CUDA_CALL(cuda_impl::leaky_relu_backward(x, g, slope, grad_x));
    return grad_x;
  }
  return detail::cpu_map(op, x, g, [slope](auto v, auto gv) {
    using T = decltype(v);
    return v > T(0) ? gv : static_cast<T>(slope) * gv;
  });
}

// relu and leaky_relu are one op; relu has slope 0.
Tensor leaky_relu_op(const char* op, const Tensor& x, double slope) {
  check_float(op, "x", x);
  const Tensor x_saved = x.detach();
  return autograd::record(op, leaky_relu_forward(op, x, slope), {x}, [op, x_saved, slope](const Tensor& g) {
    return std::vector<Tensor>{leaky_relu_backward(op, x_saved, g, slope)};
  });
}

Tensor elu_forward(const Tensor& x, double alpha) {
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "elu");
    GAT_CUDA_CALL(cuda_impl::elu_forward(x, alpha, out));
    return out;
  }
  // Both sides computed and one selected: a loop without branches or calls vectorises.
  return detail::cpu_map("elu", x, [alpha](auto v) {
    using T = decltype(v);
    const T negative = static_cast<T>(alpha) * detail::vec_expm1(std::min(v, T(0)));
    return v > T(0) ? v : negative;
  });
}

Tensor elu_backward(const Tensor& x, const Tensor& g, double alpha) {
  if (x.is_cuda()) {
    Tensor grad_x = Tensor::empty(x.shape(), x.dtype(), x.device(), "elu backward");
    GAT_CUDA_CALL(cuda_impl::elu_backward(x, g, alpha, grad_x));
    return grad_x;
  }
  return detail::cpu_map("elu backward", x, g, [alpha](auto v, auto gv) {
    using T = decltype(v);
    const T negative = static_cast<T>(alpha) * detail::vec_exp(std::min(v, T(0))) * gv;
    return v > T(0) ? gv : negative;
  });
}

}  // namespace

Tensor relu(const Tensor& x) { return leaky_relu_op("relu", x, 0.0); }

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return leaky_relu_op("leaky_relu", x, negative_slope);
}

Tensor elu(const Tensor& x, double alpha) {
  check_float("elu", "x", x);
  const Tensor x_saved = x.detach();
  return autograd::record("elu", elu_forward(x, alpha), {x}, [x_saved, alpha](const Tensor& g) {
    return std::vector<Tensor>{elu_backward(x_saved, g, alpha)};
  });
}

}  // namespace gat::ops
