#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

template <class T>
struct AddFn {
  const T* a;  // (n,)
  const T* b;  // (n,)
  T* out;      // (n,)
  __device__ void operator()(long long i) const { out[i] = a[i] + b[i]; }
};

template <class T>
struct MulFn {
  const T* a;  // (n,)
  const T* b;  // (n,)
  T* out;      // (n,)
  __device__ void operator()(long long i) const { out[i] = a[i] * b[i]; }
};

template <class T>
struct ScaleFn {
  const T* x;  // (n,)
  T s;
  T* out;      // (n,)
  __device__ void operator()(long long i) const { out[i] = s * x[i]; }
};

template <class T>
struct AddBiasFn {
  const T* x;     // (R, C)
  const T* bias;  // (C,)
  long long channels;
  T* out;         // (R, C)
  template <class I>
  __device__ void operator()(I i) const { out[i] = x[i] + bias[i % static_cast<I>(channels)]; }
};

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(a.dtype(), "add", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("add", out.numel(), AddFn<T>{a.data<T>(), b.data<T>(), out.data<T>()});
  });
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_float(a.dtype(), "mul", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("mul", out.numel(), MulFn<T>{a.data<T>(), b.data<T>(), out.data<T>()});
  });
}

void scale(const Tensor& x, double s, Tensor& out) {
  dispatch_float(x.dtype(), "scale", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("scale", out.numel(),
                            ScaleFn<T>{x.data<T>(), static_cast<T>(s), out.data<T>()});
  });
}

void add_bias(const Tensor& x, const Tensor& bias, Tensor& out) {
  dispatch_float(x.dtype(), "add_bias", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each("add_bias", out.numel(),
                            AddBiasFn<T>{x.data<T>(), bias.data<T>(), bias.numel(), out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
