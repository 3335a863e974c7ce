// The rule of segment_max (framework/ops/segment_reduce.h), shared by its CPU and CUDA kernels:
// whether the value v of a later row replaces the running max `best`. Only a strictly greater v
// does, so the first row holding the max keeps it (and its gradient); a NaN replaces a number and
// then stays, so the first NaN is passed on.
#pragma once

#include "gat/framework/rng.h"  // GAT_HOST_DEVICE

namespace gat::ops::detail {

template <class T>
GAT_HOST_DEVICE bool replaces_max(T v, T best) {
  return v > best || (v != v && best == best);  // NOLINT(misc-redundant-expression): NaN tests
}

}  // namespace gat::ops::detail
