#include "gat/framework/ops/unary.h"

#include <cmath>

#include "gat/framework/autograd.h"
#include "gat/framework/ops/detail/loops.h"
#include "gat/framework/ops/detail/unary_functions.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

Tensor unary_op(const char* op, const UnaryFn& fn, const Tensor& x) {
  check_float(op, "x", x);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op);
  kernels::unary_forward(fn, x, out);
  // Only what the backward pass reads, without history.
  const Tensor saved = unary_backward_reads_output(fn.op) ? out.detach() : x.detach();
  return autograd::record(op, out, {x}, [op, fn, saved](const Tensor& grad_out) {
    Tensor grad_x = Tensor::empty(saved.shape(), saved.dtype(), saved.device(), op);
    kernels::unary_backward(fn, saved, grad_out, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

Tensor unary_op(const char* op, UnaryOp kind, const Tensor& x) {
  UnaryFn fn;
  fn.op = kind;
  return unary_op(op, fn, x);
}

}  // namespace

Tensor exp(const Tensor& x) { return unary_op("exp", UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary_op("log", UnaryOp::log, x); }
Tensor sigmoid(const Tensor& x) { return unary_op("sigmoid", UnaryOp::sigmoid, x); }
Tensor tanh(const Tensor& x) { return unary_op("tanh", UnaryOp::tanh, x); }
Tensor relu6(const Tensor& x) { return unary_op("relu6", UnaryOp::relu6, x); }
Tensor silu(const Tensor& x) { return unary_op("silu", UnaryOp::silu, x); }
Tensor sqrt(const Tensor& x) { return unary_op("sqrt", UnaryOp::sqrt, x); }

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  return unary_op("gelu", approximate == GeluApproximate::tanh ? UnaryOp::gelu_tanh : UnaryOp::gelu, x);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  GAT_CHECK(std::isfinite(beta) && beta != 0.0, "softplus: beta = ", beta, " must be finite and not 0");
  GAT_CHECK(!std::isnan(threshold), "softplus: threshold = ", threshold, " must not be NaN");
  UnaryFn fn;
  fn.op = UnaryOp::softplus;
  fn.beta = beta;
  fn.threshold = threshold;
  return unary_op("softplus", fn, x);
}

Tensor pow(const Tensor& x, double exponent) {
  GAT_CHECK(std::isfinite(exponent), "pow: exponent = ", exponent, " must be finite");
  UnaryFn fn;
  fn.op = UnaryOp::pow;
  fn.exponent = exponent;
  return unary_op("pow", fn, x);
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  GAT_CHECK(min || max, "clamp: at least one of min and max must be given");
  GAT_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)),
            "clamp: min = ", min.value_or(-INFINITY), ", max = ", max.value_or(INFINITY),
            ": a bound must not be NaN");
  UnaryFn fn;
  fn.op = UnaryOp::clamp;
  fn.min = min.value_or(-INFINITY);
  fn.max = max.value_or(INFINITY);
  return unary_op("clamp", fn, x);
}

namespace kernels {
void unary_forward(const UnaryFn& fn, const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::unary_forward(fn, x, out));
  cpu_impl::unary_forward(fn, x, out);
}
void unary_backward(const UnaryFn& fn, const Tensor& saved, const Tensor& grad_out, Tensor& grad_x) {
  if (grad_out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::unary_backward(fn, saved, grad_out, grad_x));
  cpu_impl::unary_backward(fn, saved, grad_out, grad_x);
}
}  // namespace kernels

namespace cpu_impl {

void unary_forward(const UnaryFn& fn, const Tensor& x, Tensor& out) {
  detail::with_unary_op(fn.op, [&](auto op) {
    detail::cpu_map(x, out, [fn](auto v) {
      using T = decltype(v);
      return detail::unary_value<decltype(op)::value>(v, detail::UnaryParams<T>(fn));
    });
  });
}

void unary_backward(const UnaryFn& fn, const Tensor& saved, const Tensor& grad_out, Tensor& grad_x) {
  detail::with_unary_op(fn.op, [&](auto op) {
    detail::cpu_map(saved, grad_out, grad_x, [fn](auto s, auto g) {
      using T = decltype(s);
      return detail::unary_gradient<decltype(op)::value>(s, g, detail::UnaryParams<T>(fn));
    });
  });
}

}  // namespace cpu_impl

}  // namespace gat::ops
