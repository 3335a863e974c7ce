// The dtypes the attention ops take (docs/precision.md): f32 and f64, computed in themselves, and
// bf16 on CUDA, whose kernels read and write bf16 rows and compute in f32. (bf16 on the CPU never
// reaches these checks: the op computes it in f32 first, detail::bf16_in_f32.) Included by the
// attention ops' .cpp files only.
#pragma once

#include "gat/framework/check.h"
#include "gat/framework/tensor.h"

namespace gat::ops::attention_dtypes {

// The dtype a storage dtype is computed in: f32 for bf16, else itself. The dtype of what an op
// keeps per node (lse, pos_weight) and of the parameters beside bf16 rows (the bias).
inline DType compute_dtype(DType storage) { return storage == DType::bf16 ? DType::f32 : storage; }

// Whether an op takes bf16 `rows` (the activations it reads and writes) in its own CUDA kernels:
// the rows bf16 on CUDA, and each of `params` (parameters beside them, undefined allowed) f32.
// Otherwise a bf16 input goes through f32 (detail::bf16_in_f32): on the CPU, the reference, and on
// CUDA beside a bf16 parameter, which the kernels do not take.
template <class... P>
bool bf16_rows_on_cuda(const Tensor& rows, const P&... params) {
  return rows.defined() && rows.is_cuda() && rows.dtype() == DType::bf16 &&
         ((!params.defined() || params.dtype() == DType::f32) && ...);
}

// t is f32 or f64 (check_float), or bf16 on CUDA.
inline void check_attention_float(const char* op, const char* arg, const Tensor& t) {
  if (t.defined() && t.dtype() == DType::bf16 && t.is_cuda()) return;
  check_float(op, arg, t);
}

// t is on the device of `rows` in the dtype that rows compute in (check_same but for bf16 rows,
// beside which a parameter is f32).
inline void check_compute_dtype(const char* op, const char* arg, const Tensor& t, const char* rows_arg,
                                const Tensor& rows) {
  if (rows.dtype() != DType::bf16) return check_same(op, arg, t, rows_arg, rows);
  check_defined(op, arg, t);
  GAT_CHECK(t.device() == rows.device() && t.dtype() == DType::f32, op, ": '", arg, "' ", t.describe(),
            " must be f32 on the device of bf16 '", rows_arg, "' ", rows.describe(),
            " (parameters stay f32)");
}

}  // namespace gat::ops::attention_dtypes
