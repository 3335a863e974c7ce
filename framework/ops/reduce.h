// Reductions with autograd: sum and mean, over all elements or over one axis (f32/f64, CPU and
// CUDA).
//
//   sum(x), mean(x)              x: any shape               -> ()  (a 0-dimensional tensor)
//   sum(x, axis), mean(x, axis)  x: (d0, ..., d_axis, ...)  -> the shape of x without `axis`
//                                (axis < 0 counts from the end)
//
// Sums accumulate in double on both devices, in an order fixed by the shape alone (CPU: chunks
// of 8192 along the axis, then the chunk sums in order; CUDA: per block a fixed tree or tile,
// long axes in chunks of 16384 and a second pass), so results are reproducible bit for bit and
// independent of the thread count; the two devices agree to rounding. The mean of zero elements
// throws.
// Backward: d x = g broadcast along the reduced axis (times 1/len for mean).
#pragma once

#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
Tensor sum(const Tensor& x, int64_t axis);
Tensor mean(const Tensor& x, int64_t axis);

// The kernels (docs/design.md, the op pattern); outputs allocated by the caller:
//   sum_axis:    x viewed (outer, len, inner) -> out (outer, inner): out[o, i] = sum_l x[o, l, i]
//   expand_axis: g viewed (outer, inner) -> out (outer, len, inner): out[o, l, i] = g[o, i]
// kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(sum_axis, (const Tensor& x, int64_t outer, int64_t len, int64_t inner, Tensor& out))
GAT_DECLARE_KERNEL_FN(expand_axis, (const Tensor& g, int64_t outer, int64_t len, int64_t inner, Tensor& out))

}  // namespace gat::ops
