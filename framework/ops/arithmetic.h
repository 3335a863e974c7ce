// Elementwise arithmetic with broadcasting and autograd (f32/f64, CPU and CUDA).
//
//   add(a, b) = a + b    sub(a, b) = a - b    mul(a, b) = a * b    div(a, b) = a / b
//   the same with a double on either side (add(x, 1.0), div(1.0, x)), neg(x) = -x,
//   scale(x, s) = x * s, add_bias(x, bias) = x + bias for a bias (C,) over x (..., C),
//   and the operators a + b, a - b, a * b, a / b, -a (with doubles on either side too) in
//   namespace gat, found by argument-dependent lookup.
//
// Broadcasting, NumPy's rule restricted to what layers need: the output has the broadcast shape of
// a and b, seen as (R, C) with C its last dimension (C = 1 for a 0-dimensional output), and each
// operand must be read in one of these ways:
//   full    the output's elements (its shape is the output's, up to leading 1s)
//   row     (C,), (1, C), (1, ..., 1, C): the same C values for every row         (a bias)
//   column  (..., 1) with the output's leading dimensions: one value per row      (a per-node scale)
//   single  one element, (), (1,), (1, 1), or a double (rounded to the tensor's dtype first)
// e.g. (N, C) op (1, C), (N, C) op (C,), (N, C) op (N, 1), (N, 1) op (1, C) -> (N, C).
// Other broadcasts, and mismatched dtypes or devices, throw gat::Error naming the op and both
// tensors.
//
// Backward (g = d out), reduced back to each operand's shape by summing over what it was
// broadcast along (a row: the rows; a column: the columns; a single element: everything), with
// ops::sum (a fixed summation order on both devices):
//   add: d a = g, d b = g          sub: d a = g, d b = -g
//   mul: d a = g * b, d b = g * a  (mul(x, x) gives 2 g x: the tape sums both uses)
//   div: d a = g / b, d b = -(g / b) * out   (= -g a / b^2)
#pragma once

#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor add(double a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor mul(double a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor scale(const Tensor& x, double s);               // x * s
Tensor add_bias(const Tensor& x, const Tensor& bias);  // x (..., C), bias (C,) -> (..., C)

enum class BinaryOp { add, sub, mul, div };

// How an operand of a binary kernel is read for element (r, c) of the output (R, C).
enum class Broadcast {
  full,    // [r, c]
  row,     // [c]     (C values)
  column,  // [r]     (R values)
  single,  // [0]     (1 value, or `constant` when `tensor` is undefined)
};

struct Operand {
  Tensor tensor;  // f32/f64 on the output's device; undefined for a constant
  Broadcast how = Broadcast::single;
  double constant = 0.0;  // the value of a constant operand (converted to the output's dtype)
};

// Element (r, c) of the output (R, C) reads operand[r * row + c * col] (a constant: its value).
struct Strides {
  int64_t row, col;
};
inline Strides strides_of(Broadcast how, int64_t C) {
  switch (how) {
    case Broadcast::full:
      return {C, 1};
    case Broadcast::row:
      return {0, 1};
    case Broadcast::column:
      return {1, 0};
    case Broadcast::single:
      break;
  }
  return {0, 0};
}
// Whether an operand pair needs the row index (else the output is read flat, with r = 0).
inline bool rowwise(const Operand& a, const Operand& b) {
  auto by_row = [](Broadcast h) { return h == Broadcast::row || h == Broadcast::column; };
  return by_row(a.how) || by_row(b.how);
}

// ---- the kernels: out (R, C) = a op b, elementwise with the operands read as they say ----
// out: allocated by the caller, any shape whose last dimension is C (the whole shape is R * C).
// The backward passes are made of the same kernel (g * b, g / b, ...) and ops::sum.
GAT_DECLARE_KERNEL_FN(binary, (BinaryOp op, const Operand& a, const Operand& b, Tensor& out))

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
