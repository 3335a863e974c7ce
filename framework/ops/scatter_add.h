// scatter_add(src, index, num_segments): adds the rows of src into num_segments output rows, with
// autograd (f32/f64; CPU and CUDA). It is PyG's scatter(src, index, 0, dim_size=S, reduce='sum')
// and torch's zeros(S, ...).index_add_(0, index, src).
//
//   src: (E, ...), index: (E,) i32 with values in [0, S)  ->  out (S, ...),
//   out[s] = the sum of src[k] over the k with index[k] = s; 0 where no k has index[k] = s.
//
// The index may be in any order and may repeat. The sums use no atomics: they are index_rows'
// backward kernel (scatter_rows over a RowIndex), which adds each output row's src rows in
// ascending k. So every run gives the same bits, and the CPU and CUDA backends agree bit for bit.
// Backward: d src = d out[index] (index_rows' gather kernel).
//
// Errors (gat::Error naming scatter_add): src not f32/f64 or without rows, index not (E,) i32 or
// of another length than src's rows, a negative index, an index >= num_segments, num_segments < 0,
// a RowIndex on another device. Building a RowIndex reads the index on the host, so a layer that
// scatters along the same edges every step builds it once: RowIndex(index, device, "scatter_add").
#pragma once

#include <cstdint>

#include "gat/framework/ops/index_rows.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor scatter_add(const Tensor& src, const RowIndex& index, int64_t num_segments);
Tensor scatter_add(const Tensor& src, const Tensor& index, int64_t num_segments);

}  // namespace gat::ops
