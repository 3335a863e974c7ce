// narrow(x, axis, start, length) and select(x, axis, index): a slice along one axis, with
// autograd (any dtype, CPU and CUDA), as torch.narrow and torch.select.
//
//   narrow: x (d0, ..., L, ..., dn) -> (d0, ..., length, ..., dn), the elements at
//           start <= i < start + length along `axis`; length 0 gives an empty tensor
//   select: x (d0, ..., L, ..., dn) -> (d0, ..., dn) without `axis`: the elements at `index`
// `axis` < 0 counts from the end, as does `index` < 0 (select); start must lie in [0, L] and
// start + length in [start, L]. Anything else throws gat::Error naming the op, the argument and x.
//
// The result is a copy (not a view): x viewed (outer, L, inner) is copied as `outer` rows of
// length * inner elements with kernels::copy_rows (concat.h). Backward: d x is zero outside the
// slice and g inside it, copied back the same way.
#pragma once

#include <cstdint>

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t axis, int64_t index);

}  // namespace gat::ops
