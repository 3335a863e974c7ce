// Segment reductions over CSR offsets, with autograd (f32/f64; CPU and CUDA): segment_sum,
// segment_mean and segment_max. They are torch_scatter's segment_csr(x, offsets, reduce), and
// torch.segment_reduce(x, reduce, offsets=offsets) except on empty segments: 0 here, as in
// torch_scatter, where torch 2.11 gives NaN for mean and -inf for max.
//
//   x: (N, ...); Segments(offsets): offsets (S+1,) i32, offsets[0] = 0, non-decreasing,
//   offsets[S] = N. Segment s is the rows [offsets[s], offsets[s+1]) of x.  ->  out (S, ...):
//     segment_sum:  out[s] = the sum of the segment's rows;
//     segment_mean: out[s] = that sum / the segment's row count;
//     segment_max:  out[s] = the elementwise max of the segment's rows; a NaN wins over every
//                   number (it is passed on, as torch.amax does).
//   An empty segment gives 0 in all three.
//
// Backward, for the rows r of segment s: d x[r] = d out[s] (sum); d out[s] / count (mean); for
// max, each element's d out[s, d] goes to the one row that gave out[s, d], the FIRST of the
// segment's rows holding the max (torch_scatter's rule; torch.segment_reduce splits a tie's
// gradient evenly), and the other rows get 0. segment_max saves those arg-max rows, (S, ...) i32.
//
// Every output element is reduced by one thread over its segment's rows in ascending order, with
// no atomics: runs give the same bits, and the CPU and CUDA backends agree bit for bit.
//
// Errors (gat::Error): offsets not (S+1,) i32 with S >= 0, offsets[0] != 0, a decrease (naming
// both positions and values); x not f32/f64 or without rows, x's row count != offsets[S], the
// Segments on another device than x.
#pragma once

#include <cstdint>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

// Offsets validated once on the host (a device-to-host copy for CUDA tensors), then kept on
// `device`: a layer that reduces over the same segments every step builds this once. i32
// offsets, or a graph's i64 ones of at most 2^31 - 1 rows, kept narrowed (narrow_offsets).
class Segments {
 public:
  Segments() = default;
  Segments(const Tensor& offsets, Device device);
  explicit Segments(const Tensor& offsets) : Segments(offsets, offsets.device()) {}

  int64_t count() const { return offsets_.defined() ? offsets_.numel() - 1 : 0; }  // S
  int64_t rows() const { return rows_; }                                           // offsets[S] = N
  Device device() const { return offsets_.device(); }
  const Tensor& offsets() const { return offsets_; }  // (S+1,) i32

 private:
  Tensor offsets_;
  int64_t rows_ = 0;
};

Tensor segment_sum(const Tensor& x, const Segments& segments);
Tensor segment_mean(const Tensor& x, const Segments& segments);
Tensor segment_max(const Tensor& x, const Segments& segments);

enum class SegmentReduce { sum, mean, max };

// The kernels (docs/design.md, the op pattern); x is viewed as (N, D), D = features:
//   forward:  out (S, D) as above; arg (S, D) i32 (max only, else null): the row of x that gave
//             out[s, d], -1 for an empty segment;
//   backward: grad_x (N, D), every element overwritten, from grad_out (S, D) (arg: max only).
GAT_DECLARE_KERNEL_FN(segment_reduce_forward,
                      (const Tensor& x, const Segments& segments, SegmentReduce reduce, int64_t features,
                       Tensor& out, Tensor* arg))
GAT_DECLARE_KERNEL_FN(segment_reduce_backward,
                      (const Tensor& grad_out, const Segments& segments, SegmentReduce reduce,
                       const Tensor& arg, int64_t features, Tensor& grad_x))

}  // namespace gat::ops
