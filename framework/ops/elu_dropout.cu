#include "gat/framework/ops/activations.cuh"
#include "gat/framework/ops/elu_dropout.h"
#include "gat/framework/ops/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// body(i, keep_i) for the elements [4 block, 4 block + 4) of n, their keep bits drawn from one
// Philox block as dropout.cu draws them (all 1 for an inactive key).
template <class Body>
struct WithKeep4 {
  long long n;
  DropoutKey key;
  Body body;
  __device__ void operator()(long long block) const {
    const unsigned kept = key.active() ? key.keep4(static_cast<uint64_t>(block)) : 0xFu;
    for (long long k = 0, i = 4 * block; k < 4 && i < n; ++k, ++i) body(i, (kept >> k) & 1u);
  }
};

template <class T>
struct EluDropoutForward {
  const T* x;  // (n,)
  T alpha;
  T keep_scale;
  T* out;      // (n,)
  __device__ void operator()(long long i, unsigned keep) const {
    out[i] = DropoutKey::apply_kept(detail::elu_value(x[i], alpha), keep, keep_scale);
  }
};

template <class T>
struct EluDropoutBackward {
  const T* out;     // (n,)
  const T* g;       // (n,)
  T keep_scale;
  T alpha_scale;    // alpha * keep_scale
  T* grad_x;        // (n,)
  __device__ void operator()(long long i, unsigned keep) const {
    const T o = out[i];
    grad_x[i] = DropoutKey::apply_kept(g[i], keep, o > T(0) ? keep_scale : o + alpha_scale);
  }
};

template <class Body>
void launch_with_keep4(const char* name, long long n, const DropoutKey& key, const Body& body) {
  detail::launch_for_each(name, (n + 3) / 4, WithKeep4<Body>{n, key, body});
}

}  // namespace

void elu_dropout_forward(const Tensor& x, double alpha, const DropoutKey& key, double keep_scale,
                         Tensor& out, KeepMask&) {
  dispatch_float(x.dtype(), "elu_dropout", [&](auto zero) {
    using T = decltype(zero);
    launch_with_keep4("elu_dropout", x.numel(), key,
                      EluDropoutForward<T>{x.data<T>(), static_cast<T>(alpha), static_cast<T>(keep_scale),
                                           out.data<T>()});
  });
}

void elu_dropout_backward(const Tensor& out, const Tensor& grad_out, double alpha,
                          const DropoutKey& key, double keep_scale, const KeepMask&,
                          Tensor& grad_x) {
  dispatch_float(out.dtype(), "elu_dropout backward", [&](auto zero) {
    using T = decltype(zero);
    launch_with_keep4("elu_dropout backward", out.numel(), key,
                      EluDropoutBackward<T>{out.data<T>(), grad_out.data<T>(), static_cast<T>(keep_scale),
                                            static_cast<T>(alpha * keep_scale), grad_x.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
