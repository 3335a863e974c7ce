#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/detail/binary_math.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// A BroadcastLayout as the kernels read it: the offsets of output element i in each operand.
struct Walk {
  int axes;
  long long size[kMaxBroadcastAxes];
  long long stride[3][kMaxBroadcastAxes];
  // offsets[k] of element i: i's index along each merged axis (innermost last) times the strides
  // (one division per axis beyond the first; none for a flat output).
  template <class I>
  __device__ void offsets(I i, I (&out)[3]) const {
    out[0] = out[1] = out[2] = 0;
    for (int axis = axes - 1; axis >= 0; --axis) {
      const I index = axis == 0 ? i : i % static_cast<I>(size[axis]);
      for (int k = 0; k < 3; ++k) out[k] += index * static_cast<I>(stride[k][axis]);
      if (axis > 0) i /= static_cast<I>(size[axis]);
    }
  }
};

Walk walk_of(const BroadcastLayout& layout) {
  Walk walk{layout.axes, {}, {}};
  for (int axis = 0; axis < layout.axes; ++axis) {
    walk.size[axis] = layout.size[axis];
    for (int k = 0; k < 3; ++k) walk.stride[k][axis] = layout.stride[k][axis];
  }
  return walk;
}

template <class T>
struct Source {
  const T* data;  // null: the constant
  T constant;
  __device__ T at(long long offset) const { return data ? data[offset] : constant; }
};

template <class T>
Source<T> source_of(const Operand& x) {
  return {x.tensor.defined() ? x.tensor.data<T>() : nullptr, static_cast<T>(x.constant)};
}

template <class T, BinaryOp kOp>
struct BinaryFn {
  Walk walk;
  Source<T> a, b;
  T* out;
  template <class I>
  __device__ void operator()(I i) const {
    I at[3];
    walk.offsets(i, at);
    out[i] = detail::binary_element<kOp>(a.at(at[0]), b.at(at[1]));
  }
};

template <class T>
struct WhereFn {
  Walk walk;
  Source<T> a, b;
  const int32_t* cond;
  T* out;
  template <class I>
  __device__ void operator()(I i) const {
    I at[3];
    walk.offsets(i, at);
    out[i] = cond[at[2]] != 0 ? a.at(at[0]) : b.at(at[1]);
  }
};

}  // namespace

void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  const Walk walk = walk_of(broadcast_layout("binary", out.shape(), {a.tensor, b.tensor}));
  dispatch_float(out.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    detail::visit_binary_op(op, [&](auto kind) {
      constexpr BinaryOp kOp = decltype(kind)::value;
      detail::launch_for_each("binary", out.numel(),
                              BinaryFn<T, kOp>{walk, source_of<T>(a), source_of<T>(b), out.data<T>()});
    });
  });
}

void where(const Tensor& cond, const Operand& a, const Operand& b, Tensor& out) {
  const Walk walk = walk_of(broadcast_layout("where", out.shape(), {a.tensor, b.tensor, cond}));
  dispatch_float(out.dtype(), "where", [&](auto zero) {
    using T = decltype(zero);
    detail::launch_for_each(
        "where", out.numel(),
        WhereFn<T>{walk, source_of<T>(a), source_of<T>(b), cond.data<int32_t>(), out.data<T>()});
  });
}

}  // namespace gat::ops::cuda_impl
