// Elementwise arithmetic with NumPy's broadcasting and autograd (f32/f64, CPU and CUDA).
//
//   add(a, b) = a + b    sub(a, b) = a - b    mul(a, b) = a * b    div(a, b) = a / b
//   maximum(a, b), minimum(a, b)   (a NaN on either side gives NaN, as in PyTorch)
//   pow(a, b) = a^b                 (std::pow: a negative a to a non-integer b is NaN)
//   where(cond, a, b) = cond != 0 ? a : b, for an i32 mask cond
//   the same with a double on either side (add(x, 1.0), div(1.0, x), pow(2.0, x), where(m, x, 0.0));
//   a tensor to a number's power, pow(x, 2.0), is in unary.h (it has no exponent gradient);
//   neg(x) = -x, scale(x, s) = x * s, add_bias(x, bias) = x + bias for a bias (C,) over x (..., C),
//   and the operators a + b, a - b, a * b, a / b, -a (with doubles on either side too) in
//   namespace gat, found by argument-dependent lookup.
//
// Broadcasting, NumPy's and PyTorch's rule over any number of axes: the shapes are aligned at
// their last axes (a missing leading axis counts as 1); on each axis the sizes must be equal or
// one of them 1; the output takes the larger (an axis of size 0 against 1 gives 0). E.g.
// (2, 3, 4) op (3, 4), (2, 1, 4) op (3, 1), (N, C) op (), (4, 1) op (1, 5) -> (4, 5). A double
// is rounded to the tensor's dtype first. Shapes that do not broadcast (the error names the op,
// both tensors and the axis), mismatched dtypes or devices, and a cond that is not i32 throw
// gat::Error. At most kMaxBroadcastAxes axes may remain once the axes that every operand reads
// alike are merged (so any rank of plain or row/column broadcasts is fine).
//
// Backward (g = d out), each reduced to its operand's shape by summing over the axes the operand
// was broadcast along (kernels::sum_axis: a fixed summation order on both devices, no atomics):
//   add: d a = g, d b = g          sub: d a = g, d b = -g
//   mul: d a = g * b, d b = g * a  (mul(x, x) gives 2 g x: the tape sums both uses)
//   div: d a = g / b, d b = -(g / b) * out   (= -g a / b^2)
//   maximum: d a = g where a > b, g / 2 where a == b, 0 where a < b; d b the mirror image
//   minimum: d a = g where a < b, g / 2 where a == b, 0 where a > b; d b the mirror image
//            (PyTorch's split of a tie; where neither a < b, a == b nor a > b holds, a NaN, each
//            side gets g)
//   pow: d a = g * b * a^(b - 1), 0 where b == 0; d b = g * a^b * log(a), 0 where a == 0 and
//        b >= 0 (PyTorch's conventions: pow(0, 0) has d a = 0, d b = 0; pow(0, b < 0) gives inf)
//   where: d a = g where cond != 0, else 0; d b = g where cond == 0, else 0; cond gets none.
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include <cstdint>
#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor add(double a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor mul(double a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor pow(double a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor scale(const Tensor& x, double s);               // x * s
Tensor add_bias(const Tensor& x, const Tensor& bias);  // x (..., C), bias (C,) -> (..., C)

enum class BinaryOp {
  add,
  sub,
  mul,
  div,
  maximum,
  minimum,
  pow,
  // the backward passes' factors:
  max_share,          // the share of d maximum(x, y) that x takes: 1/2 where x == y, 0 where x < y, else 1
  pow_grad_base,      // d x^y / d x = y * x^(y - 1), 0 where y == 0
  pow_grad_exponent,  // d x^y / d y = x^y * log(x), 0 where x == 0 and y >= 0
};

// One operand of a kernel: a tensor (broadcast to the output), or a constant where it is undefined.
struct Operand {
  Tensor tensor;          // on the output's device; f32/f64 of the output's dtype, or i32 for a mask
  double constant = 0.0;  // the value of a constant operand (converted to the output's dtype)
};

constexpr int kMaxBroadcastAxes = 8;

// How the kernels walk a broadcast: the output's shape with its size-1 axes dropped and adjacent
// axes merged wherever every operand reads them as one, and each operand's element strides over
// those axes (0 along an axis it is broadcast along, and everywhere for a constant). The output
// is contiguous: element i of the output is at flat index i. The last axis is the innermost;
// along it every stride is 0 or 1.
struct BroadcastLayout {
  int axes = 0;                          // 0 for a single element (or an empty output)
  int64_t size[kMaxBroadcastAxes];       // sizes of the merged axes
  int64_t stride[3][kMaxBroadcastAxes];  // stride[k][axis] of operand k
};
// The layout of `operands` (undefined: constants) read into an output of shape `out`; each
// operand's shape must broadcast to `out`. Throws naming `op` beyond kMaxBroadcastAxes axes.
BroadcastLayout broadcast_layout(const char* op, const Shape& out, const std::vector<Tensor>& operands);

// ---- the kernels: out = a op b, elementwise, with the operands broadcast to out's shape ----
// out: allocated by the caller (contiguous, any shape that a and b broadcast to), of a's or b's
// float dtype. The backward passes are made of the same kernels and kernels::sum_axis.
GAT_DECLARE_KERNEL_FN(binary, (BinaryOp op, const Operand& a, const Operand& b, Tensor& out))
// out = cond != 0 ? a : b, with cond (i32) broadcast to out's shape as a and b are.
GAT_DECLARE_KERNEL_FN(where, (const Tensor& cond, const Operand& a, const Operand& b, Tensor& out))

}  // namespace gat::ops

namespace gat {

inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator-(const Tensor& x) { return ops::neg(x); }

}  // namespace gat
