// add_into(dst, src): dst += src, elementwise, in place (bumps dst's version: autograd.h), no autograd.
// Used by the autograd engine to accumulate gradients and by optimisers.
//   dst: (any shape) f32/f64 (bf16: added in f32, rounded once), src: same shape, dtype and
//   device.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

void add_into(Tensor& dst, const Tensor& src);

// The kernel (docs/design.md, the op pattern); kernels:: runs cpu_impl:: or cuda_impl:: by
// dst's device.
GAT_DECLARE_KERNEL_FN(add_into, (Tensor & dst, const Tensor& src))

}  // namespace gat::ops
