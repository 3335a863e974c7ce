#include "gat/framework/ops/log_softmax.h"

#include "gat/framework/autograd.h"
#include "gat/framework/ops/dispatch.h"

namespace gat::ops {

namespace {

void log_softmax_forward(const Tensor& x, Tensor& out) {
  if (x.is_cuda()) return GAT_CUDA_CALL(cuda_impl::log_softmax_forward(x, out));
  dispatch_float(x.dtype(), "log_softmax", [&](auto zero) {
    using T = decltype(zero);
    const int64_t N = x.size(0), C = x.size(1);
    const T* in = x.data<T>();  // (N, C)
    T* o = out.data<T>();       // (N, C)
#pragma omp parallel for if (N * C > 16384)
    for (int64_t r = 0; r < N; ++r) {
      const T lse = cpu_impl::row_logsumexp(in + r * C, C);
      for (int64_t c = 0; c < C; ++c) o[r * C + c] = in[r * C + c] - lse;
    }
  });
}

void log_softmax_backward(const Tensor& out, const Tensor& grad_out, Tensor& grad_x) {
  if (out.is_cuda()) return GAT_CUDA_CALL(cuda_impl::log_softmax_backward(out, grad_out, grad_x));
  dispatch_float(out.dtype(), "log_softmax", [&](auto zero) {
    using T = decltype(zero);
    const int64_t N = out.size(0), C = out.size(1);
    const T* y = out.data<T>();       // (N, C)
    const T* g = grad_out.data<T>();  // (N, C)
    T* dx = grad_x.data<T>();         // (N, C)
#pragma omp parallel for if (N * C > 16384)
    for (int64_t r = 0; r < N; ++r) {
      T sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += g[r * C + c];
      for (int64_t c = 0; c < C; ++c) dx[r * C + c] = g[r * C + c] - std::exp(y[r * C + c]) * sum;
    }
  });
}

}  // namespace

Tensor log_softmax(const Tensor& x) {
  check_float("log_softmax", "x", x);
  check_dim("log_softmax", "x", x, 2);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), "log_softmax");  // (N, C)
  log_softmax_forward(x, out);
  return autograd::record("log_softmax", out, {x}, [out = out.detach()](const Tensor& grad_out) {
    Tensor grad_x = Tensor::empty(out.shape(), out.dtype(), out.device(), "log_softmax grad");
    log_softmax_backward(out, grad_out, grad_x);
    return std::vector<Tensor>{grad_x};
  });
}

}  // namespace gat::ops
