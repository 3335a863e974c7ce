#include "gat/framework/ops/unary.h"

#include <cmath>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/vec_math.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

Tensor unary_op(const char* op, UnaryOp kind, const Tensor& x) {
  check_float(op, "x", x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
  kernels::unary_forward(kind, x, out);
  // Only what the backward pass reads, without history.
  const Tensor x_saved = kind == UnaryOp::log ? x.detach() : Tensor();
  const Tensor out_saved = kind == UnaryOp::log ? Tensor() : out.detach();
  return autograd::record(op, out, {x}, [op, kind, x_saved, out_saved](const Tensor& grad_out) {
    const Tensor& like = x_saved.defined() ? x_saved : out_saved;
    Tensor grad_x = Tensor::empty(like.shape(), like.dtype(), like.device(), op);
    kernels::unary_backward(kind, x_saved, out_saved, grad_out, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace

Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary_op("log", UnaryOp::log, x); }
Tensor sigmoid(const Tensor& x) { return unary_op("sigmoid", UnaryOp::sigmoid, x); }
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::tanh, x); }

namespace kernels {
void unary_forward(UnaryOp op, const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::unary_forward(op, x, out));
  cpu_impl::unary_forward(op, x, out);
}
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& out, const Tensor& grad_out, Tensor& grad_x) {
  if (grad_out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::unary_backward(op, x, out, grad_out, grad_x));
  cpu_impl::unary_backward(op, x, out, grad_out, grad_x);
}
}  // namespace kernels

namespace cpu_impl {

// exp in f32 is detail::vec_exp (vectorised, within 2 ulp); the rest are the C library's.
void unary_forward(UnaryOp op, const Tensor& x, Tensor& out) {
  switch (op) {
    case UnaryOp::exp:
      return detail::cpu_map(x, out, [](auto v) { return detail::vec_exp(v); });
    case UnaryOp::log:
      return detail::cpu_map(x, out, [](auto v) { return std::log(v); });
    case UnaryOp::sigmoid:
      return detail::cpu_map(x, out, [](auto v) {
        using T = decltype(v);
        return T(1) / (T(1) + detail::vec_exp(-v));
      });
    case UnaryOp::tanh:
      return detail::cpu_map(x, out, [](auto v) { return std::tanh(v); });
  }
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& out, const Tensor& grad_out, Tensor& grad_x) {
  switch (op) {
    case UnaryOp::exp:
      return detail::cpu_map(out, grad_out, grad_x, [](auto y, auto g) { return g * y; });
    case UnaryOp::log:
      return detail::cpu_map(x, grad_out, grad_x, [](auto v, auto g) { return g / v; });
    case UnaryOp::sigmoid:
      return detail::cpu_map(out, grad_out, grad_x, [](auto y, auto g) {
        using T = decltype(y);
        return g * y * (T(1) - y);
      });
    case UnaryOp::tanh:
      return detail::cpu_map(out, grad_out, grad_x, [](auto y, auto g) {
        using T = decltype(y);
        return g * (T(1) - y * y);
      });
  }
}

}  // namespace cpu_impl

}  // namespace gat::ops
