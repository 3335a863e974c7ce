#include "gat/framework/ops/arithmetic.h"

#include "gat/framework/autograd.h"
#include "gat/framework/ops/dispatch.h"
#include "gat/framework/ops/loops.h"
#include "gat/framework/ops/reduce.h"

namespace gat::ops {

namespace {

// Entry checks of the same-shape binary ops.
void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  check_float(op, "a", a);
  check_same(op, "a", a, "b", b);
  check_shape(op, "b", b, a.shape());
}

// The kernels without autograd: the forward passes and the backward passes share them.
Tensor add_values(const Tensor& a, const Tensor& b) {
  if (a.is_cuda()) {
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device(), "add");
    GAT_CUDA_CALL(cuda_impl::add(a, b, out));
    return out;
  }
  return detail::cpu_map("add", a, b, [](auto x, auto y) { return x + y; });
}

Tensor mul_values(const Tensor& a, const Tensor& b) {
  if (a.is_cuda()) {
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device(), "mul");
    GAT_CUDA_CALL(cuda_impl::mul(a, b, out));
    return out;
  }
  return detail::cpu_map("mul", a, b, [](auto x, auto y) { return x * y; });
}

Tensor scale_values(const Tensor& x, double s) {
  if (x.is_cuda()) {
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "scale");
    GAT_CUDA_CALL(cuda_impl::scale(x, s, out));
    return out;
  }
  return detail::cpu_map("scale", x, [s](auto v) { return static_cast<decltype(v)>(s) * v; });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  check_binary("add", a, b);
  return autograd::record("add", add_values(a, b), {a, b},
                          [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary("mul", a, b);
  const Tensor a_saved = a.detach(), b_saved = b.detach();  // no history in the closure
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return autograd::record("mul", mul_values(a, b), {a, b}, [=](const Tensor& g) {
    return std::vector<Tensor>{need_a ? mul_values(g, b_saved) : Tensor(),
                               need_b ? mul_values(g, a_saved) : Tensor()};
  });
}

Tensor scale(const Tensor& x, double s) {
  check_float("scale", "x", x);
  return autograd::record("scale", scale_values(x, s), {x},
                          [s](const Tensor& g) { return std::vector<Tensor>{scale_values(g, s)}; });
}

Tensor add_bias(const Tensor& x, const Tensor& bias) {
  check_float("add_bias", "x", x);
  check_same("add_bias", "x", x, "bias", bias);
  GAT_CHECK(x.dim() >= 1, "add_bias: 'x' must have at least one dimension, got ", x.describe());
  const int64_t channels = x.size(-1);
  check_shape("add_bias", "bias", bias, {channels});
  const int64_t rows = shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));

  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "add_bias");
  if (x.is_cuda()) {
    GAT_CUDA_CALL(cuda_impl::add_bias(x, bias, out));
  } else {
    dispatch_float(x.dtype(), "add_bias", [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();     // (R, C)
      const T* pb = bias.data<T>();  // (C,)
      T* po = out.data<T>();         // (R, C)
      detail::parallel_for(rows, [&](int64_t r) {
        for (int64_t c = 0; c < channels; ++c) po[r * channels + c] = px[r * channels + c] + pb[c];
      }, channels);
    });
  }
  return autograd::record("add_bias", out, {x, bias}, [rows, channels](const Tensor& g) {
    return std::vector<Tensor>{g, sum(g.view({rows, channels}), 0)};
  });
}

}  // namespace gat::ops
