// fill_(t, value): every element of t (any shape, f32/f64/bf16/i32, either device) set to value, in
// place (bumps its version: autograd.h), no autograd. On CUDA a kernel on the framework's stream: no host
// copy, no sync.
#pragma once

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

void fill_(Tensor& t, double value);

// The kernel (docs/design.md, the op pattern); kernels:: runs cpu_impl:: or cuda_impl:: by t's
// device.
GAT_DECLARE_KERNEL_FN(fill_, (Tensor & t, double value))

}  // namespace gat::ops
