// global_add_pool, global_mean_pool and global_max_pool: PyG's graph-level readouts over a batch
// vector, with autograd (f32/f64; CPU and CUDA). They are segment_sum, segment_mean and
// segment_max (segment_reduce.h) over the batch's graphs, with those ops' rules: a graph with no
// nodes gives 0, as in PyG, and max's gradient goes to the first node holding the max (PyG's,
// through torch's scatter_reduce, splits a tie's gradient evenly). Values match PyG 2.8's.
//
//   x: (N, ...), batch: (N,) i32, batch[i] in [0, size) the graph of node i  ->  out (size, ...),
//   out[b] = the sum / mean / max of the rows x[i] with batch[i] = b.
//   size = -1 takes max(batch) + 1 (0 when N = 0), as PyG's size=None.
//
// batch may be in any order. Sorted (non-decreasing, as PyG's DataLoader makes it), graph b's
// nodes are a run of rows and x goes to the segment op as it is. Unsorted, x's rows are first
// gathered into graph order (index_rows, by a stable sort of batch): within a graph the nodes
// keep their order in x, so a tie in max still goes to the node that comes first in x.
//
// batch may be on either device; it is read on the host (a device-to-host copy for a CUDA tensor).
// Errors (gat::Error naming the op): x not f32/f64 or without rows, batch not (N,) i32 for N =
// x's rows, a negative batch entry, an entry >= size, size < -1 or >= 2^31 - 1.
#pragma once

#include <cstdint>

#include "gat/framework/tensor.h"

namespace gat::ops {

Tensor global_add_pool(const Tensor& x, const Tensor& batch, int64_t size = -1);
Tensor global_mean_pool(const Tensor& x, const Tensor& batch, int64_t size = -1);
Tensor global_max_pool(const Tensor& x, const Tensor& batch, int64_t size = -1);

}  // namespace gat::ops
