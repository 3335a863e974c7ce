// Elementwise arithmetic with autograd: add, mul, scale, add_bias (f32/f64, CPU and CUDA).
//
//   add(a, b)         a, b: same shape, dtype and device       -> a + b          (same shape)
//   mul(a, b)         a, b: same shape, dtype and device       -> a * b          (elementwise)
//   scale(x, s)       x: any shape                             -> s * x
//   add_bias(x, b)    x: (..., C), b: (C,)                     -> x + b broadcast over the leading axes
//
// Backward (g = d out):
//   add:      d a = g, d b = g
//   mul:      d a = g * b, d b = g * a            (mul(x, x) gives 2 g x: the tape sums both uses)
//   scale:    d x = s * g
//   add_bias: d x = g, d b = sum of g over the leading axes (ops::sum, a fixed summation order)
// Mismatched shapes, dtypes or devices throw gat::Error naming the op and both tensors.
#pragma once

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, double s);
Tensor add_bias(const Tensor& x, const Tensor& bias);

namespace cuda_impl {  // arithmetic.cu; every output is allocated by the caller
void add(const Tensor& a, const Tensor& b, Tensor& out);    // all (n,) flat
void mul(const Tensor& a, const Tensor& b, Tensor& out);    // all (n,) flat
void scale(const Tensor& x, double s, Tensor& out);         // (n,) flat
void add_bias(const Tensor& x, const Tensor& bias, Tensor& out);  // x, out (R, C) flat; bias (C,)
}  // namespace cuda_impl

}  // namespace gat::ops
