// index_rows(x, index): gathers rows of x, with autograd (gather: any dtype; gradient: f32/f64;
// CPU and CUDA).
//
//   x: (N, ...), index: (K,) i32 with values in [0, N)  ->  out (K, ...), out[k] = x[index[k]]
//
// Backward scatters g (K, ...) into d x (N, ...), summing the rows of repeated indices. It is
// deterministic without atomics: a RowIndex holds, built once on the host, the positions k
// sorted by (index[k], k) and the runs of equal index values; each distinct row of d x is then
// written by one thread per feature, which adds its g rows in ascending k. The CPU and CUDA
// backends add in that same order, so they agree bit for bit.
//
// index_select(x, axis, index) (torch.index_select) gathers along any axis: x viewed (outer, N,
// inner) gives out (outer, K, inner), out[o, k] = x[o, index[k]] (axis < 0 counts from the end);
// it is index_rows on each of the `outer` slices (one gather and, backward, one scatter per
// slice: an inner axis of a tensor with many outer slices is slow on CUDA).
//
// A RowIndex validates the indices when it is built (negative ones throw there); index_rows
// checks the largest against x.size(0) and throws naming the index, its position and the bound.
// Building one reads the indices on the host (a device-to-host copy for CUDA tensors), so a
// training loop builds its RowIndex once and reuses it; the index_rows(x, Tensor) overload
// builds a fresh one per call, without the backward's plan when no gradient is recorded.
// bf16 inputs: computed in f32, the result stored in bf16 (docs/precision.md).
#pragma once

#include <cstdint>
#include <vector>

#include "gat/framework/ops/kernel.h"
#include "gat/framework/tensor.h"

namespace gat::ops {

class RowIndex {
 public:
  RowIndex() = default;
  // index: (K,) i32 on any device; the plan is stored on `device`. Errors name `op`, the op the
  // plan is built for (index_rows, scatter_add).
  RowIndex(const Tensor& index, Device device, const char* op = "index_rows");
  explicit RowIndex(const Tensor& index) : RowIndex(index, index.device()) {}
  // The same checks without the backward's plan (order, rows and run_ptr undefined; no sort of
  // the indices): for gathers that record no gradient, such as the loader's rows. index_rows
  // refuses it where it would record a backward, scatter_add always.
  static RowIndex gather_only(const Tensor& index, Device device, const char* op = "index_rows");
  bool has_backward_plan() const { return order_.defined(); }
  // index (K,) i32 as it is, neither read nor copied: rows a caller knows are in range (the
  // loader's sampled ids, left on the device so that the host never waits for them). It must
  // stay unchanged until the gather has run. For kernels::gather_rows only: index_rows refuses it
  // (it cannot check the range), as scatter_add refuses any plan without the backward's part.
  static RowIndex unchecked(const Tensor& index);
  bool checked() const { return checked_; }

  int64_t size() const { return index_.numel(); }  // K
  Device device() const { return index_.device(); }
  int32_t max_index() const { return max_index_; }        // -1 when K = 0
  int64_t max_position() const { return max_position_; }  // the first k holding max_index()

  const Tensor& index() const { return index_; }  // (K,) i32
  const Tensor& order() const { return order_; }  // (K,) i32: k sorted by (index[k], k)
  const Tensor& rows() const { return rows_; }    // (U,) i32: the distinct index values, ascending
  const Tensor& run_ptr() const {
    return run_ptr_;
  }  // (U+1,) i32: rows()[u] is index[order[j]]
     //   for j in [run_ptr[u], run_ptr[u+1])

 private:
  // Checks values (K,) (negative ones throw) and sets max_index_ and max_position_.
  void find_largest(const int32_t* values, int32_t count, const char* op);

  Tensor index_, order_, rows_, run_ptr_;
  int32_t max_index_ = -1;
  int64_t max_position_ = -1;
  bool checked_ = true;  // false: RowIndex::unchecked
};

Tensor index_rows(const Tensor& x, const RowIndex& index);
Tensor index_rows(const Tensor& x, const Tensor& index);  // builds RowIndex(index, x.device())
Tensor index_select(const Tensor& x, int64_t axis, const RowIndex& index);
Tensor index_select(const Tensor& x, int64_t axis, const Tensor& index);

// The positions of the set entries, ascending: (count,) i32 on the CPU.
Tensor mask_to_index(const std::vector<bool>& mask);
Tensor mask_to_index(const std::vector<uint8_t>& mask);

// The kernels (docs/design.md, the op pattern):
//   gather_rows:  out (K, row_words) = x (N, row_words) gathered by index.index(), in 32-bit
//                 words (any dtype);
//   scatter_rows: grad_x (N, D), zeroed by the caller: grad_x[rows[u]] = sum over j in run u of
//                 grad_out[order[j]] (grad_out (K, D)), added in ascending j.
// kernels:: runs cpu_impl:: or cuda_impl:: by the tensors' device.
GAT_DECLARE_KERNEL_FN(gather_rows, (const Tensor& x, const RowIndex& index, int64_t row_words, Tensor& out))
GAT_DECLARE_KERNEL_FN(scatter_rows,
                      (const Tensor& grad_out, const RowIndex& index, int64_t features, Tensor& grad_x))

}  // namespace gat::ops
