#include "gat/framework/ops/arithmetic.h"
#include "gat/framework/ops/detail/loops.cuh"

namespace gat::ops::cuda_impl {

namespace {

// One operand as the kernel reads it: data[r * row + c * col], or `constant` when data is null.
template <class T>
struct Source {
  const T* data;
  T constant;
  long long row, col;
  template <class I>
  __device__ T at(I r, I c) const {
    return data ? data[r * static_cast<I>(row) + c * static_cast<I>(col)] : constant;
  }
};

template <class T>
Source<T> source_of(const Operand& x, long long C) {
  const Strides s = strides_of(x.how, C);
  return {x.tensor.defined() ? x.tensor.data<T>() : nullptr, static_cast<T>(x.constant), s.row, s.col};
}

// out (R, C) = a op b. kRowwise: the operands need the row index (a 32-bit division per element
// when the index is 32-bit, see loops.cuh); else r = 0 and the output is read flat.
template <class T, BinaryOp kOp, bool kRowwise>
struct BinaryFn {
  Source<T> a, b;
  T* out;  // (R, C)
  long long cols;
  template <class I>
  __device__ void operator()(I i) const {
    I r = 0, c = i;
    if (kRowwise) {
      r = i / static_cast<I>(cols);
      c = i - r * static_cast<I>(cols);
    }
    const T x = a.at(r, c), y = b.at(r, c);
    if constexpr (kOp == BinaryOp::add) out[i] = x + y;
    if constexpr (kOp == BinaryOp::sub) out[i] = x - y;
    if constexpr (kOp == BinaryOp::mul) out[i] = x * y;
    if constexpr (kOp == BinaryOp::div) out[i] = x / y;
  }
};

template <class T, BinaryOp kOp>
void launch(const char* name, const Operand& a, const Operand& b, Tensor& out) {
  const long long C = out.dim() == 0 ? 1 : out.size(-1);
  const Source<T> sa = source_of<T>(a, C), sb = source_of<T>(b, C);
  if (rowwise(a, b))
    detail::launch_for_each(name, out.numel(), BinaryFn<T, kOp, true>{sa, sb, out.data<T>(), C});
  else
    detail::launch_for_each(name, out.numel(), BinaryFn<T, kOp, false>{sa, sb, out.data<T>(), C});
}

}  // namespace

void binary(BinaryOp op, const Operand& a, const Operand& b, Tensor& out) {
  dispatch_float(out.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case BinaryOp::add:
        return launch<T, BinaryOp::add>("add", a, b, out);
      case BinaryOp::sub:
        return launch<T, BinaryOp::sub>("sub", a, b, out);
      case BinaryOp::mul:
        return launch<T, BinaryOp::mul>("mul", a, b, out);
      case BinaryOp::div:
        return launch<T, BinaryOp::div>("div", a, b, out);
    }
  });
}

}  // namespace gat::ops::cuda_impl
