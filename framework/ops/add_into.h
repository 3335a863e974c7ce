// add_into(dst, src): dst += src, elementwise, in place, no autograd.
// Used by the autograd engine to accumulate gradients and by optimisers.
//   dst: (any shape) f32/f64, src: same shape, dtype and device.
#pragma once

#include "gat/framework/tensor.h"

namespace gat::ops {

void add_into(Tensor& dst, const Tensor& src);

namespace cuda_impl {
void add_into(Tensor& dst, const Tensor& src);  // add_into.cu
}

}  // namespace gat::ops
