// reshape(x, shape): the same elements in a new shape, with autograd (any dtype, any device).
//   x: any shape -> `shape` (same number of elements; one -1 is inferred)
// The result is a view: it shares x's storage (Tensor::view). Backward: d x = g viewed as x.
#pragma once

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor reshape(const Tensor& x, const Shape& shape);

}  // namespace gat::ops
